/* labprobe absent: what a read that reaches no device below a slot returns,
 * and how long it takes. On hardware such a read ends in all ones after a
 * completion timeout (or at once, with Unsupported Request); Debian's QEMU
 * returns 0 for MMIO at once, the lab's QEMU (lab_platform=fidelity) all
 * ones after the port's x-completion-timeout-us.
 *
 * Two reads, the slot must be empty:
 *   config: dword 0 (Vendor/Device ID) of function 0 on the slot's
 *           secondary bus, by a type-1 config cycle (0xCF8/0xCFC);
 *   mmio:   the first dword of the port's memory window (else its
 *           prefetchable window), through /dev/mem
 *           (bridge windows are not busy resources, so STRICT_DEVMEM
 *           without IO_STRICT_DEVMEM allows it). */
#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One of the port's memory windows. The resource file has one line a
 * resource and ends with the four bridge windows (I/O, memory, prefetchable,
 * unused); where they start depends on the config (CONFIG_PCI_IOV adds six
 * lines before them), so count from the end: from_end 3 is the memory
 * window, 2 the prefetchable one. */
static int port_mem_window(const char *port, int from_end, unsigned long long *start, unsigned long long *end)
{
	char path[256], lines[32][128];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource", port);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (n < 32 && fgets(lines[n], sizeof(lines[n]), f))
		n++;
	fclose(f);
	if (n < 4)
		return -1;
	return sscanf(lines[n - from_end], "%llx %llx", start, end) == 2 && *start && *end > *start ? 0 : -1;
}

static int read_config(int bus, uint32_t *val, long long *ns, char *err, size_t len)
{
	long long t0;

	if (iopl(3)) {
		snprintf(err, len, "iopl: %s", strerror(errno));
		return -1;
	}
	t0 = mono_ns();
	outl(0x80000000u | (uint32_t)bus << 16, 0xcf8);
	*val = inl(0xcfc);
	*ns = mono_ns() - t0;
	outl(0, 0xcf8);
	return 0;
}

static int read_mmio(unsigned long long addr, uint32_t *val, long long *ns, char *err, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long long base = addr & ~((unsigned long long)page - 1);
	volatile uint32_t *p;
	void *map;
	long long t0;
	int fd = open("/dev/mem", O_RDONLY | O_SYNC);

	if (fd < 0) {
		snprintf(err, len, "/dev/mem: %s", strerror(errno));
		return -1;
	}
	map = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, (off_t)base);
	close(fd);
	if (map == MAP_FAILED) {
		snprintf(err, len, "mmap /dev/mem at 0x%llx: %s", base, strerror(errno));
		return -1;
	}
	p = (volatile uint32_t *)((char *)map + (addr - base));
	t0 = mono_ns();
	*val = *p;
	*ns = mono_ns() - t0;
	munmap(map, (size_t)page);
	return 0;
}

int cmd_absent(int argc, char **argv, struct json_object *out)
{
	enum { OPT_SLOT = OPT_FIRST, OPT_EXPECT_ONES };
	static const struct option opts[] = {
		{ "slot", required_argument, NULL, OPT_SLOT },
		{ "expect-ones", no_argument, NULL, OPT_EXPECT_ONES },
		{ NULL, 0, NULL, 0 },
	};
	const char *slot = NULL;
	bool expect_ones = false;
	char port[32], err[256] = "";
	unsigned long long ws = 0, we = 0;
	uint32_t cval = 0, mval = 0;
	long long cns = -1, mns = -1;
	struct checks c;
	int bus, opt;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_SLOT:
			slot = optarg;
			if (check_slot("--slot", slot))
				return 2;
			break;
		case OPT_EXPECT_ONES:
			expect_ones = true;
			break;
		default:
			return 2;
		}
	}
	if (!slot) {
		fprintf(stderr, "labprobe absent: --slot N is required\n");
		return 2;
	}
	check_init(&c);
	json_object_object_add(out, "slot", json_object_new_string(slot));
	bus = slot_bus(slot);
	check(&c, bus >= 0, "slot-bus", "slot %s has secondary bus %d", slot, bus);
	if (bus < 0)
		goto done;
	check(&c, !bus_has_device(bus), "slot-empty", "no device on bus %02x", bus);
	if (!slot_port(bus, port, sizeof(port))) {
		check(&c, false, "slot-port", "no bridge found for bus %02x", bus);
		goto done;
	}
	json_object_object_add(out, "port", json_object_new_string(port));

	if (read_config(bus, &cval, &cns, err, sizeof(err)))
		check(&c, false, "config-read", "%s", err);
	else {
		json_object_object_add(out, "config_value", json_object_new_int64(cval));
		json_object_object_add(out, "config_ns", json_object_new_int64(cns));
		if (expect_ones)
			check(&c, cval == 0xffffffffu, "config-all-ones", "%02x:00.0 dword 0 = 0x%08x", bus, cval);
	}

	/* whichever window the port has: both are forwarded the same way */
	bool pref = false;
	if (port_mem_window(port, 3, &ws, &we)) {
		pref = true;
		if (port_mem_window(port, 2, &ws, &we)) {
			check(&c, false, "mem-window", "port %s has no memory window", port);
			goto done;
		}
	}
	json_object_object_add(out, "mmio_addr", json_object_new_int64((int64_t)ws));
	json_object_object_add(out, "mmio_window", json_object_new_string(pref ? "prefetchable" : "memory"));
	if (read_mmio(ws, &mval, &mns, err, sizeof(err)))
		check(&c, false, "mmio-read", "%s", err);
	else {
		json_object_object_add(out, "mmio_value", json_object_new_int64(mval));
		json_object_object_add(out, "mmio_ns", json_object_new_int64(mns));
		if (expect_ones)
			check(&c, mval == 0xffffffffu, "mmio-all-ones", "0x%llx = 0x%08x", ws, mval);
	}
done:
	json_object_object_add(out, "checks", c.list);
	return c.failed ? 1 : 0;
}
