#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		buf[0] = '\0';
		return -EIO;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

int read_linef(char *buf, size_t len, const char *fmt, ...)
{
	char path[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return read_line(path, buf, len);
}

bool path_exists(const char *fmt, ...)
{
	char path[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return access(path, F_OK) == 0;
}

int write_str(const char *path, const char *val)
{
	FILE *f = fopen(path, "w");
	int ret = 0;

	if (!f)
		return -errno;
	if (fputs(val, f) < 0)
		ret = -EIO;
	if (fclose(f) != 0 && !ret)
		ret = -errno;
	return ret;
}

void scopy(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096], c;
	size_t len = strlen(path);
	struct stat st;

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	/* each prefix ending before a '/', then the whole path */
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		c = *p;
		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = c;
		if (!c)
			break;
	}
	if (stat(path, &st))
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

void sleep_s(double s)
{
	struct timespec ts;

	if (!(s > 0))
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

bool link_base(char *out, size_t len, const char *fmt, ...)
{
	char link[512], target[512], *base;
	va_list ap;
	ssize_t n;

	out[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(link, sizeof(link), fmt, ap);
	va_end(ap);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	base = strrchr(target, '/');
	scopy(out, len, base ? base + 1 : target);
	return true;
}

struct json_object *ms3(double ms)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.3f", ms);
	return json_object_new_double_s(strtod(buf, NULL), buf);
}

double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void check_init(struct checks *c)
{
	c->list = json_object_new_array();
	c->failed = 0;
}

void check(struct checks *c, bool ok, const char *name, const char *fmt, ...)
{
	struct json_object *o = json_object_new_object();
	char detail[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	json_object_object_add(o, "name", json_object_new_string(name));
	json_object_object_add(o, "ok", json_object_new_boolean(ok));
	json_object_object_add(o, "detail", json_object_new_string(detail));
	json_object_array_add(c->list, o);
	if (!ok)
		c->failed++;
}

ssize_t pci_config_read(const char *dev, void *buf, size_t len)
{
	char path[320];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/config", dev);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = pread(fd, buf, len, 0);
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

int pci_find_cap(const uint8_t *cfg, size_t len, int id)
{
	if (len < 0x40 || !(cfg[0x06] & 0x10))	/* Status: Capabilities List */
		return 0;
	for (int pos = cfg[0x34] & 0xfc, ttl = 48; pos >= 0x40 && (size_t)pos + 1 < len && ttl > 0; ttl--) {
		if (cfg[pos] == id)
			return pos;
		pos = cfg[pos + 1] & 0xfc;
	}
	return 0;
}

int pci_find_ext_cap(const uint8_t *cfg, size_t len, int id)
{
	for (int pos = 0x100, ttl = 480; pos >= 0x100 && (size_t)pos + 4 <= len && ttl > 0; ttl--) {
		uint32_t h;

		memcpy(&h, cfg + pos, 4);
		if (!h || h == 0xffffffffu)
			return 0;
		if ((int)(h & 0xffff) == id)
			return pos;
		pos = (h >> 20) & 0xffc;
	}
	return 0;
}

const char *hook(const char *env, const char *dflt)
{
	const char *p = getenv(env);

	return p && p[0] ? p : dflt;
}

void boot_id(char *buf, size_t len)
{
	if (read_line(hook("LABPROBE_BOOT_ID", "/proc/sys/kernel/random/boot_id"), buf, len))
		scopy(buf, len, "unknown");
}
