/* The tracefs side of arm and collect: the kprobe events of group
 * labprobe that arm places in its tracefs instance (INSTANCE, clock: mono),
 * its own (below) and then breakdown.c's, and their removal. collect reads
 * and parses the trace itself (collect.c). */
#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static const struct lp_probe probes[] = {
	{ "lp_isr", "pciehp_isr irq=%di:s32", "p", true },
	{ "lp_change", "pciehp_handle_presence_or_link_change events=%si:x32", "p", true },
	{ "lp_unconf", "pciehp_unconfigure_device presence=%si:u8", "p", true },
	{ "lp_disc", "pci_dev_set_disconnected", "p", false },
	{ "lp_nvrm", "nvme_remove", "p", true },
	{ "lp_nvrm_ret", "nvme_remove", "r", true },
	{ "lp_del", "device_del name=+0(+0(%di)):string", "p", true },
	{ "lp_add", "device_add name=+0(+0(%di)):string", "p", true },
	{ "lp_conf", "pciehp_configure_device", "p", false },
	/* AER recovery (port-wide events; kernels without AER lack them) */
	{ "lp_aer", "aer_isr irq=%di:s32", "p", false },
	{ "lp_rec", "pcie_do_recovery state=%si:u32", "p", false },
	{ "lp_rec_ret", "pcie_do_recovery ret=$retval:u32", "r", false },
	{ "lp_reset", "pciehp_reset_slot probe=%si:s32", "p", false },
	/* the device whose driver a thread releases: attributes nvme_remove
	 * when one IRQ thread tears down a whole JBOF */
	{ "lp_unbind", "device_release_driver_internal name=+0(+0(%di)):string", "p", false },
};
#define NPROBES (sizeof(probes) / sizeof(probes[0]))
const size_t lp_nprobes = NPROBES;

const struct lp_probe *probe_at(size_t i)
{
	return i < NPROBES ? &probes[i] : &breakdown_probes[i - NPROBES];
}

int writef(const char *path, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int fd, ret = 0;
	ssize_t len;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	len = write(fd, buf, strlen(buf));
	if (len < 0)
		ret = -errno;
	close(fd);
	return ret;
}

void tracefs_mount(void)
{
	if (access(TRACEFS "/kprobe_events", F_OK))
		mount("nodev", TRACEFS, "tracefs", 0, NULL);
}

void probes_remove(void)
{
	char path[256];

	for (size_t i = 0; i < NALL; i++) {
		snprintf(path, sizeof(path), INSTANCE "/events/labprobe/%s/enable", probe_at(i)->name);
		writef(path, "0");
	}
	rmdir(INSTANCE);
	for (size_t i = 0; i < NALL; i++)
		writef(TRACEFS "/kprobe_events", "-:labprobe/%s\n", probe_at(i)->name);
}
