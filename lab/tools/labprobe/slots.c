/* What the guest sees in a hotplug slot: the port that serves it, the
 * port's interrupt vectors, and the NVMe controller and namespaces below. */
#include "labprobe.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int slot_bus(const char *slot)
{
	char addr[64];
	unsigned int dom, bus;

	if (read_linef(addr, sizeof(addr), "/sys/bus/pci/slots/%s/address", slot) < 0)
		return -1;
	if (sscanf(addr, "%x:%x", &dom, &bus) != 2)
		return -1;
	return (int)bus;
}

/* The bridge whose secondary bus is `bus`, as "0000:00:02.0": the device
 * with a pci_bus/0000:BB directory. (Its secondary_bus_number attribute
 * would do too, but reading it is a config access, which runtime-resumes
 * a port in D3cold.) */
bool slot_port(int bus, char *port, size_t len)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (path_exists("/sys/bus/pci/devices/%s/pci_bus/0000:%02x", e->d_name, bus)) {
			scopy(port, len, e->d_name);
			found = true;
		}
	}
	closedir(d);
	return found;
}

/* The port's interrupt numbers (MSI/MSI-X vectors, else its INTx line). */
int port_irqs(const char *port, int *irqs, int max)
{
	char path[256], line[32];
	DIR *d;
	struct dirent *e;
	int n = 0;
	long v;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/msi_irqs", port);
	d = opendir(path);
	if (d) {
		while ((e = readdir(d)) && n < max)
			if (scan_long(e->d_name, NULL, 0, INT_MAX, &v))	/* not . or .. */
				irqs[n++] = (int)v;
		closedir(d);
	}
	if (!n && read_linef(line, sizeof(line), "/sys/bus/pci/devices/%s/irq", port) == 0 &&
	    scan_long(line, NULL, 0, INT_MAX, &v))
		irqs[n++] = (int)v;
	return n;
}

/* NVMe controllers whose PCI device sits on `bus`; names into ctrls. */
int bus_ctrls(int bus, char ctrls[][32], int max)
{
	DIR *d = opendir("/sys/class/nvme");
	struct dirent *e;
	char prefix[32];
	int n = 0;

	if (!d)
		return 0;
	snprintf(prefix, sizeof(prefix), "0000:%02x:", bus);
	while ((e = readdir(d)) && n < max) {
		char base[64];

		if (e->d_name[0] == '.')
			continue;
		if (link_base(base, sizeof(base), "/sys/class/nvme/%s/device", e->d_name) &&
		    !strncmp(base, prefix, strlen(prefix)))
			scopy(ctrls[n++], 32, e->d_name);
	}
	closedir(d);
	return n;
}

/* Namespace block devices (nvmeXnY) of controller `ctrl`. */
int ctrl_namespaces(const char *ctrl, char nss[][32], int max)
{
	char path[256];
	DIR *d;
	struct dirent *e;
	int n = 0;
	size_t cl = strlen(ctrl);

	snprintf(path, sizeof(path), "/sys/class/nvme/%s", ctrl);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max)
		if (!strncmp(e->d_name, ctrl, cl) && e->d_name[cl] == 'n')
			scopy(nss[n++], 32, e->d_name);
	closedir(d);
	return n;
}

/* The serial number of controller `ctrl`, trailing blanks stripped. */
bool ctrl_serial(const char *ctrl, char *serial, size_t len)
{
	if (read_linef(serial, len, "/sys/class/nvme/%s/serial", ctrl) < 0)
		return false;
	for (size_t i = strlen(serial); i > 0 && serial[i - 1] == ' '; i--)
		serial[i - 1] = '\0';
	return true;
}

/* Is any PCI function present on `bus`? */
bool bus_has_device(int bus)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	char prefix[32];
	bool found = false;

	if (!d)
		return false;
	snprintf(prefix, sizeof(prefix), "0000:%02x:", bus);
	while (!found && (e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)))
			found = true;
	closedir(d);
	return found;
}

/* The nearest hotplug port above `port` (a JBOF's root port for a switch's
 * downstream port): the closest bridge in the device's sysfs path served
 * by pciehp, as "0000:00:04.0"; false when there is none. */
bool port_hotplug_parent(const char *port, char *parent, size_t len)
{
	char link[300], target[512], *c, *last = NULL;
	ssize_t n;

	snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", port);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	/* .../pci0000:00/0000:00:04.0/0000:03:00.0/0000:04:01.0: walk up */
	for (c = strrchr(target, '/'); c; c = strrchr(target, '/')) {
		*c = '\0';
		last = strrchr(target, '/');
		last = last ? last + 1 : target;
		if (strlen(last) != 12 || last[4] != ':')
			break;
		if (path_exists("/sys/bus/pci_express/drivers/pciehp/%s:pcie004", last)) {
			scopy(parent, len, last);
			return true;
		}
	}
	return false;
}

/* The physical slot (/sys/bus/pci/slots/<name>) whose bus is `bus`. */
bool bus_slot_name(int bus, char *name, size_t len)
{
	DIR *d = opendir("/sys/bus/pci/slots");
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] != '.' && slot_bus(e->d_name) == bus) {
			scopy(name, len, e->d_name);
			found = true;
		}
	}
	closedir(d);
	return found;
}

/* The secondary bus of bridge `port`: its pci_bus/0000:BB directory (no
 * config access, which would runtime-resume a suspended port); -1 if none. */
int port_secondary_bus(const char *port)
{
	char path[300];
	DIR *d;
	struct dirent *e;
	unsigned int dom, bus;
	int found = -1;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/pci_bus", port);
	d = opendir(path);
	if (!d)
		return -1;
	while (found < 0 && (e = readdir(d)))
		if (sscanf(e->d_name, "%x:%x", &dom, &bus) == 2)
			found = (int)bus;
	closedir(d);
	return found;
}
