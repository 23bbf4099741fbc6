/* Pure logic: config addresses, slot register decoding, HMP text parsing,
 * serial numbers. No libvirt here: the unit tests link this file alone. */
#include "hpslot.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

uint32_t hp_cf8_address(int bus, int dev, int fn, int reg)
{
	return 0x80000000u | (uint32_t)(bus & 0xff) << 16 | (uint32_t)(dev & 0x1f) << 11 |
	       (uint32_t)(fn & 0x7) << 8 | (uint32_t)(reg & 0xfc);
}

int hp_cfc_port(int reg)
{
	return PCI_CONF_DATA_PORT + (reg & 3);
}

uint64_t hp_ecam_offset(int bus, int dev, int fn, int reg)
{
	return (uint64_t)(bus & 0xff) << 20 | (uint64_t)(dev & 0x1f) << 15 |
	       (uint64_t)(fn & 0x7) << 12 | (uint64_t)(reg & 0xfff);
}

uint16_t hp_yank_value(uint16_t old_sltctl)
{
	return old_sltctl | SLTCTL_YANK;
}

uint16_t hp_sltctl_with_pic(uint16_t sltctl, int ind)
{
	return (uint16_t)((sltctl & ~SLTCTL_PIC) | (ind & 3) << 8);
}

const char *hp_indicator_name(int field)
{
	static const char *const names[] = { "reserved", "on", "blink", "off" };
	return names[field & 3];
}

int hp_pic(uint16_t sltctl)
{
	return (sltctl & SLTCTL_PIC) >> 8;
}

int hp_aic(uint16_t sltctl)
{
	return (sltctl & SLTCTL_AIC) >> 6;
}

bool hp_power_on(uint16_t sltctl)
{
	return !(sltctl & SLTCTL_PCC);
}

const char *hp_empty_slot_busy(uint16_t sltctl, uint16_t sltsta)
{
	if (sltsta & SLTSTA_PDS)
		return "presence is still detected";
	if (hp_pic(sltctl) == SLTCTL_IND_BLINK)
		return "its power indicator is blinking";
	if (hp_power_on(sltctl))
		return "it is empty but still powered on (the guest has not finished tearing it "
		       "down, or does not manage the slot)";
	if (hp_pic(sltctl) != SLTCTL_IND_OFF)
		return "it is powered off but its power indicator is still on (the guest is "
		       "finishing the teardown)";
	return NULL;
}

void hp_sltsta_flags(uint16_t sltsta, char *buf, size_t len)
{
	static const struct { uint16_t bit; const char *name; } f[] = {
		{ SLTSTA_ABP, "ABP" }, { SLTSTA_PFD, "PFD" }, { SLTSTA_MRLSC, "MRLSC" },
		{ SLTSTA_PDC, "PDC" }, { SLTSTA_CC, "CC" }, { SLTSTA_MRLSS, "MRLSS" },
		{ SLTSTA_PDS, "PDS" }, { SLTSTA_EIS, "EIS" }, { SLTSTA_DLLSC, "DLLSC" },
	};
	size_t n = 0;

	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (!(sltsta & f[i].bit))
			continue;
		int w = snprintf(buf + n, len > n ? len - n : 0, "%s%s", n ? " " : "", f[i].name);
		if (w > 0)
			n += (size_t)w;
	}
}

int hp_find_cap(const uint8_t *cfg, int id)
{
	if (hp_le16(cfg) == 0xffff || !(hp_le16(cfg + PCI_STATUS) & PCI_STATUS_CAP_LIST))
		return 0;
	int pos = cfg[PCI_CAPABILITY_LIST] & 0xfc;
	for (int ttl = 48; pos >= 0x40 && ttl > 0; ttl--) {
		if (pos > 0xfc)
			return 0;
		if (cfg[pos] == 0xff)
			return 0;
		if (cfg[pos] == id)
			return pos;
		pos = cfg[pos + 1] & 0xfc;
	}
	return 0;
}

/* ---- HMP text ------------------------------------------------------------ */

int hp_parse_xp_words(const char *text, uint64_t addr, uint32_t *out, int max)
{
	int n = 0;
	const char *p = text;

	if (!text || strstr(text, "Cannot access memory"))
		return -1;
	while (*p && n < max) {
		while (*p == '\r' || *p == '\n' || *p == ' ')
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		unsigned long long a = strtoull(p, &end, 16);
		if (errno || end == p || *end != ':')
			return -1;
		if (a != addr + 4ull * (unsigned)n)
			return -1;
		p = end + 1;
		for (;;) {
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p == '\r' || *p == '\n' || !*p)
				break;
			if (strncmp(p, "0x", 2))
				return -1;
			errno = 0;
			unsigned long v = strtoul(p, &end, 16);
			if (errno || end == p || v > 0xffffffffUL)
				return -1;
			if (n < max)
				out[n++] = (uint32_t)v;
			p = end;
		}
	}
	return n;
}

int hp_parse_ioport_read(const char *text, uint32_t *val)
{
	if (!text || strncmp(text, "port", 4))
		return -1;
	const char *eq = strstr(text, "= 0x");
	if (!eq)
		return -1;
	char *end;
	errno = 0;
	unsigned long v = strtoul(eq + 2, &end, 16);
	if (errno || end == eq + 2 || v > 0xffffffffUL)
		return -1;
	*val = (uint32_t)v;
	return 0;
}

int hp_parse_mtree_mmcfg(const char *text, uint64_t *base, uint64_t *size)
{
	const char *p = text;

	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char line[512];

		if (len >= sizeof(line))
			len = sizeof(line) - 1;
		memcpy(line, p, len);
		line[len] = 0;
		p = eol ? eol + 1 : NULL;

		char *name = strstr(line, "): ");
		if (!name || strncmp(name + 3, "pcie-mmcfg-mmio", 15) || strstr(line, "[disabled]"))
			continue;
		unsigned long long lo, hi;
		if (sscanf(line, " %llx-%llx", &lo, &hi) != 2 || hi <= lo)
			continue;
		*base = lo;
		*size = hi - lo + 1;
		return 0;
	}
	return -1;
}

bool hp_hmp_is_error(const char *text)
{
	static const char *const errs[] = {
		"unknown command", "invalid char in format", "Try \"help", "invalid", "Error",
		"error", "Cannot access memory", "missing", "extraneous",
	};
	if (!text)
		return true;
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (strstr(text, errs[i]))
			return true;
	return false;
}

/* ---- serials --------------------------------------------------------------- */

bool hp_valid_aer_error(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 32)
		return false;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return n > 2 && n <= 10 && strspn(s + 2, "0123456789abcdefABCDEF") == n - 2;
	return isupper((unsigned char)s[0]) &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

bool hp_valid_serial(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > HP_SERIAL_MAX)
		return false;
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f || *s == '"' || *s == '\'' || *s == ',' || *s == '<' ||
		    *s == '>' || *s == '&')
			return false;
	return true;
}

/* ---- add --prop ------------------------------------------------------------ */

const char *hp_prop_invalid(const char *kv)
{
	static const char *const own[] = { "id", "drive", "serial", "bus", "driver" };
	size_t kl = strcspn(kv, "=");

	if (!kv[kl])
		return "give KEY=VALUE";
	if (kl == 0 || kl > 40 || strspn(kv, "abcdefghijklmnopqrstuvwxyz0123456789-_.") < kl)
		return "KEY is 1..40 lower-case letters, digits, '-', '_' or '.'";
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strlen(own[i]) == kl && !strncmp(kv, own[i], kl))
			return "id, drive, serial, bus and driver are set by hpslot";
	if (!kv[kl + 1])
		return "VALUE is empty";
	return NULL;
}

struct json_object *hp_prop_value(const char *v)
{
	char *end;
	long long n;

	if (!strcmp(v, "true") || !strcmp(v, "false"))
		return json_object_new_boolean(v[0] == 't');
	errno = 0;
	n = strtoll(v, &end, 10);
	if (!errno && end != v && !*end)
		return json_object_new_int64(n);
	return json_object_new_string(v);
}

int hp_serial_bump(const char *serial, char *out, size_t len)
{
	const char *g = NULL;
	char buf[128];

	for (const char *p = serial; (p = strstr(p, "-g")); p += 2) {
		const char *d = p + 2;
		if (!*d)
			continue;
		while (isdigit((unsigned char)*d))
			d++;
		if (!*d && d > p + 2)
			g = p;
	}
	if (g) {
		unsigned long gen = strtoul(g + 2, NULL, 10);
		snprintf(buf, sizeof(buf), "%.*s-g%lu", (int)(g - serial), serial, gen + 1);
	} else {
		snprintf(buf, sizeof(buf), "%s-g1", serial);
	}
	if (!hp_valid_serial(buf) || strlen(buf) >= len)
		return -1;
	strcpy(out, buf);
	return 0;
}

/* Value of attribute `name` inside one tag (between p and end). */
static int attr(const char *p, const char *end, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);
	for (const char *q = p; q + nl + 2 < end; q++) {
		if (strncmp(q, name, nl) || q[nl] != '=' || (q != p && !isspace((unsigned char)q[-1])))
			continue;
		char quote = q[nl + 1];
		if (quote != '"' && quote != '\'')
			continue;
		const char *v = q + nl + 2;
		const char *ve = memchr(v, quote, (size_t)(end - v));
		if (!ve || (size_t)(ve - v) >= len)
			return -1;
		memcpy(out, v, (size_t)(ve - v));
		out[ve - v] = 0;
		return 0;
	}
	return -1;
}

struct rec {
	int slot;
	char serial[64];
};

static int metadata_records(const char *xml, struct rec *r, int max)
{
	int n = 0;
	for (const char *p = xml ? xml : ""; (p = strstr(p, "<slot")) && n < max; p += 5) {
		if (!isspace((unsigned char)p[5]))
			continue;
		const char *end = strchr(p, '>');
		char num[16];
		if (!end)
			break;
		if (attr(p, end, "n", num, sizeof(num)) || attr(p, end, "serial", r[n].serial, sizeof(r[n].serial)))
			continue;
		char *e;
		long v = strtol(num, &e, 10);
		if (*e || v < 0 || v > 0xffff)
			continue;
		r[n++].slot = (int)v;
	}
	return n;
}

int hp_metadata_serial(const char *xml, int slot, char *out, size_t len)
{
	struct rec r[HP_MAX_SLOTS];
	int n = metadata_records(xml, r, HP_MAX_SLOTS);
	for (int i = n - 1; i >= 0; i--) {
		if (r[i].slot == slot && strlen(r[i].serial) < len) {
			strcpy(out, r[i].serial);
			return 0;
		}
	}
	return -1;
}

int hp_metadata_set(const char *xml, int slot, const char *serial, char *out, size_t len)
{
	struct rec r[HP_MAX_SLOTS + 1];
	int n = metadata_records(xml, r, HP_MAX_SLOTS);
	int i;
	size_t used = 0;

	if (!hp_valid_serial(serial))
		return -1;
	for (i = 0; i < n && r[i].slot != slot; i++)
		;
	if (i == n) {
		if (n == HP_MAX_SLOTS)
			return -1;
		n++;
	}
	r[i].slot = slot;
	snprintf(r[i].serial, sizeof(r[i].serial), "%s", serial);
#define PUT(...) do { \
		int w_ = snprintf(out + used, len > used ? len - used : 0, __VA_ARGS__); \
		if (w_ < 0 || (size_t)w_ >= (len > used ? len - used : 0)) return -1; \
		used += (size_t)w_; \
	} while (0)
	PUT("<serials>");
	for (int k = 0; k < n; k++)
		PUT("<slot n=\"%d\" serial=\"%s\"/>", r[k].slot, r[k].serial);
	PUT("</serials>");
#undef PUT
	return 0;
}

static void xml_unescape(char *s)
{
	static const struct { const char *ent; char c; } ents[] = {
		{ "&quot;", '"' }, { "&apos;", '\'' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&amp;", '&' },
	};
	char *w = s;
	for (char *r = s; *r;) {
		size_t i;
		for (i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
			size_t l = strlen(ents[i].ent);
			if (!strncmp(r, ents[i].ent, l)) {
				*w++ = ents[i].c;
				r += l;
				break;
			}
		}
		if (i == sizeof(ents) / sizeof(ents[0]))
			*w++ = *r++;
	}
	*w = 0;
}

/* Calls fn(value) for each <qemu:arg value=...> until fn returns 0. */
static int each_qemu_arg(const char *xml, int (*fn)(const char *v, void *ctx), void *ctx)
{
	for (const char *p = xml ? xml : ""; (p = strstr(p, "<qemu:arg")); p += 9) {
		const char *end = strstr(p, "/>");
		char v[2048];
		if (!end)
			break;
		if (attr(p + 9, end, "value", v, sizeof(v)))
			continue;
		xml_unescape(v);
		if (!fn(v, ctx))
			return 0;
	}
	return -1;
}

/* id and serial of a -device argument in JSON or key=value syntax */
static int device_arg(const char *v, char *driver, char *id, char *serial, size_t len)
{
	driver[0] = id[0] = serial[0] = 0;
	if (v[0] == '{') {
		struct json_object *o = json_tokener_parse(v), *x;
		if (!o)
			return -1;
		if (json_object_object_get_ex(o, "driver", &x))
			snprintf(driver, len, "%s", json_object_get_string(x));
		if (json_object_object_get_ex(o, "id", &x))
			snprintf(id, len, "%s", json_object_get_string(x));
		if (json_object_object_get_ex(o, "serial", &x))
			snprintf(serial, len, "%s", json_object_get_string(x));
		json_object_put(o);
		return 0;
	}
	/* key=value: the first item is the driver (or driver=...) */
	char buf[2048];
	snprintf(buf, sizeof(buf), "%s", v);
	int first = 1;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), first = 0) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			if (first)
				snprintf(driver, len, "%s", tok);
			continue;
		}
		*eq = 0;
		if (!strcmp(tok, "driver"))
			snprintf(driver, len, "%s", eq + 1);
		else if (!strcmp(tok, "id"))
			snprintf(id, len, "%s", eq + 1);
		else if (!strcmp(tok, "serial"))
			snprintf(serial, len, "%s", eq + 1);
	}
	return 0;
}

struct boot_ctx {
	const char *id;
	char *out;
	size_t len;
	int found;
};

static int boot_serial_cb(const char *v, void *vctx)
{
	struct boot_ctx *c = vctx;
	char driver[128], id[128], serial[128];
	if (device_arg(v, driver, id, serial, sizeof(id)) || strcmp(id, c->id) || !serial[0])
		return -1;
	if (strlen(serial) >= c->len)
		return -1;
	strcpy(c->out, serial);
	c->found = 1;
	return 0;
}

int hp_xml_boot_serial(const char *xml, const char *device_id, char *out, size_t len)
{
	struct boot_ctx c = { device_id, out, len, 0 };
	each_qemu_arg(xml, boot_serial_cb, &c);
	return c.found ? 0 : -1;
}

static int prefix_cb(const char *v, void *vctx)
{
	struct boot_ctx *c = vctx;
	char driver[128], id[128], serial[128];
	if (device_arg(v, driver, id, serial, sizeof(id)) || strcmp(driver, "nvme") || !serial[0])
		return -1;
	/* <prefix>-s<digits>-g<digits> */
	char *g = strstr(serial, "-s");
	char *last = NULL;
	for (; g; g = strstr(g + 2, "-s"))
		last = g;
	if (!last || last == serial || !isdigit((unsigned char)last[2]))
		return -1;
	if ((size_t)(last - serial) >= c->len)
		return -1;
	memcpy(c->out, serial, (size_t)(last - serial));
	c->out[last - serial] = 0;
	c->found = 1;
	return 0;
}

int hp_xml_serial_prefix(const char *xml, char *out, size_t len)
{
	struct boot_ctx c = { NULL, out, len, 0 };
	each_qemu_arg(xml, prefix_cb, &c);
	return c.found ? 0 : -1;
}

/* ---- x-absent-read-pcs ------------------------------------------------ */

int hp_parse_absent_pcs(const char *s, struct hp_absent_pc *out, int max)
{
	int n = 0;
	bool other = false;

	if (!s)
		return -1;
	if (!*s)
		return 0;
	for (const char *p = s;;) {
		const char *colon = strchr(p, ':');
		const char *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		if (!colon || colon > end || n >= max || other)
			return -1;
		size_t kl = (size_t)(colon - p), hl = kl - 2;
		if (kl == 5 && !strncmp(p, "other", 5)) {
			other = true;
		} else if (kl > 2 && hl <= 16 && p[0] == '0' && p[1] == 'x' &&
			   strspn(p + 2, "0123456789abcdef") >= hl) {
			/* a guest pc as QEMU prints it: lowercase, no leading zeros */
			if (hl > 1 && p[2] == '0')
				return -1;
		} else {
			return -1;
		}
		size_t vl = (size_t)(end - colon - 1);
		if (!vl || vl > 19 || strspn(colon + 1, "0123456789") < vl)
			return -1;
		long long c = 0;
		for (size_t i = 0; i < vl; i++) {
			int d = colon[1 + i] - '0';
			if (c > (0x7fffffffffffffffLL - d) / 10)
				return -1;
			c = c * 10 + d;
		}
		snprintf(out[n].pc, sizeof(out[n].pc), "%.*s", (int)kl, p);
		out[n].count = c;
		n++;
		if (!*end)
			return n;
		p = end + 1;
	}
}
