/* labprobe smoke: the booted lab VM is what the profile asked for.
 *
 *   labprobe smoke --release R --slots 1,2,... [--drive SLOT=SERIAL]...
 *                  [--hostname H] [--cloud-init-wait SECONDS]
 *
 * Checks: the running kernel is release R; every slot is registered by
 * pciehp on a port bound to the pciehp service; every drive's controller
 * sits below its slot with a namespace block device; no other NVMe
 * controller exists; cloud-init's init stage finished without errors and
 * set the hostname; the kernel log has no finding. */
#include "labprobe.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MAX_ITEMS 512

/* Is the port whose secondary bus is `bus` served by the pciehp driver? */
static bool pciehp_serves_bus(int bus)
{
	char port[64];

	/* portdrv names a service <port>:pcie<type-4><service>: 004 on a root
	 * port, 204 on a switch downstream port (a JBOF's slots) */
	return slot_port(bus, port, sizeof(port)) &&
	       (path_exists("/sys/bus/pci_express/drivers/pciehp/%s:pcie004", port) ||
		path_exists("/sys/bus/pci_express/drivers/pciehp/%s:pcie204", port));
}

/* Finds the NVMe controller with this serial: name in ctrl, PCI address in pci. */
static bool find_ctrl(const char *serial, char *ctrl, size_t clen, char *pci, size_t plen)
{
	DIR *d = opendir("/sys/class/nvme");
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		char s[128];

		if (e->d_name[0] == '.')
			continue;
		if (!ctrl_serial(e->d_name, s, sizeof(s)) || strcmp(s, serial))
			continue;
		if (!link_base(pci, plen, "/sys/class/nvme/%s/device", e->d_name))
			continue;
		scopy(ctrl, clen, e->d_name);
		found = true;
	}
	closedir(d);
	return found;
}

static int count_ctrls(void)
{
	DIR *d = opendir("/sys/class/nvme");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static bool find_namespace(const char *ctrl, char *ns, size_t len)
{
	char nss[8][32];

	if (ctrl_namespaces(ctrl, nss, 8) < 1)
		return false;
	scopy(ns, len, nss[0]);
	return true;
}

/* cloud-init's init stage: 1 finished cleanly, 0 not yet, -1 with errors. */
static int cloud_init_state(char *detail, size_t len)
{
	struct json_object *st = json_object_from_file("/run/cloud-init/status.json");
	struct json_object *v1, *init, *fin, *errs;
	int ret = 0;

	scopy(detail, len, "no status yet");
	if (!st)
		return 0;
	if (json_object_object_get_ex(st, "v1", &v1) &&
	    json_object_object_get_ex(v1, "init", &init) &&
	    json_object_object_get_ex(init, "finished", &fin) && fin &&
	    json_object_get_double(fin) > 0) {
		json_object_object_get_ex(init, "errors", &errs);
		if (errs && json_object_array_length(errs)) {
			scopy(detail, len, json_object_to_json_string(errs));
			ret = -1;
		} else {
			scopy(detail, len, "init stage finished");
			ret = 1;
		}
	}
	json_object_put(st);
	return ret;
}

int cmd_smoke(int argc, char **argv, struct json_object *out)
{
	enum { OPT_RELEASE = OPT_FIRST, OPT_SLOTS, OPT_DRIVE, OPT_HOSTNAME, OPT_CI_WAIT };
	static const struct option opts[] = {
		{ "release", required_argument, NULL, OPT_RELEASE },
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "drive", required_argument, NULL, OPT_DRIVE },
		{ "hostname", required_argument, NULL, OPT_HOSTNAME },
		{ "cloud-init-wait", required_argument, NULL, OPT_CI_WAIT },
		{ NULL, 0, NULL, 0 },
	};
	const char *release = NULL, *hostname = NULL;
	char *slots[MAX_ITEMS], *drives[MAX_ITEMS], *serials[MAX_ITEMS], *eq;
	int nslots = 0, ndrives = 0, ci_wait = 120, opt;
	struct checks c;
	struct utsname u;
	struct json_object *findings, *ns_list = json_object_new_array();
	char *slot_arg = NULL;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_RELEASE:
			release = optarg;
			break;
		case OPT_SLOTS:
			free(slot_arg);
			slot_arg = strdup(optarg);
			if ((nslots = parse_slots("--slots", slot_arg, slots, MAX_ITEMS)) < 0)
				return 2;
			break;
		case OPT_DRIVE:
			eq = strchr(optarg, '=');
			if (ndrives == MAX_ITEMS) {
				arg_error("--drive is given more than %d times", MAX_ITEMS);
				return 2;
			}
			if (!eq) {
				arg_error("--drive takes SLOT=SERIAL, got '%s'", optarg);
				return 2;
			}
			*eq = '\0';
			if (check_slot("--drive", optarg))
				return 2;
			drives[ndrives] = optarg;
			serials[ndrives++] = eq + 1;
			break;
		case OPT_HOSTNAME:
			hostname = optarg;
			break;
		case OPT_CI_WAIT:
			if (parse_int_opt("--cloud-init-wait", optarg, 0, TIMEOUT_MAX, &ci_wait))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (!release || !nslots) {
		fprintf(stderr, "labprobe smoke: --release and --slots are required\n");
		return 2;
	}

	check_init(&c);
	uname(&u);
	check(&c, !strcmp(u.release, release), "kernel-release",
	      "running %s, expected %s", u.release, release);

	for (int i = 0; i < nslots; i++) {
		char name[64];
		int bus = slot_bus(slots[i]);
		bool hp = path_exists("/sys/bus/pci/slots/%s/power", slots[i]);

		snprintf(name, sizeof(name), "slot-%s-pciehp", slots[i]);
		check(&c, bus >= 0 && hp && pciehp_serves_bus(bus), name,
		      "slot %s: %s, bus %02x, %s", slots[i],
		      bus >= 0 ? "registered" : "missing from /sys/bus/pci/slots",
		      bus < 0 ? 0 : bus,
		      bus >= 0 && hp && pciehp_serves_bus(bus) ? "pciehp bound" :
		      "no pciehp hotplug controller");
	}

	for (int i = 0; i < ndrives; i++) {
		char *serial = serials[i], name[96], ctrl[64] = "", pci[64] = "", ns[64] = "";
		char want[32], sectors[32] = "0";
		int bus;
		long nsect;
		bool ok;

		bus = slot_bus(drives[i]);
		snprintf(name, sizeof(name), "drive-slot-%s", drives[i]);
		snprintf(want, sizeof(want), "0000:%02x:00.0", bus < 0 ? 0 : bus);
		ok = find_ctrl(serial, ctrl, sizeof(ctrl), pci, sizeof(pci)) &&
		     find_namespace(ctrl, ns, sizeof(ns)) &&
		     read_linef(sectors, sizeof(sectors), "/sys/block/%s/size", ns) == 0 &&
		     scan_long(sectors, NULL, 1, LONG_MAX, &nsect) && path_exists("/dev/%s", ns) && !strcmp(pci, want);
		check(&c, ok, name, "serial %s: controller %s at %s (slot at %s), namespace %s, %s sectors",
		      serial, ctrl[0] ? ctrl : "none", pci[0] ? pci : "-", want, ns[0] ? ns : "none", sectors);
		if (ok) {
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "slot", json_object_new_string(drives[i]));
			json_object_object_add(o, "serial", json_object_new_string(serial));
			json_object_object_add(o, "namespace", json_object_new_string(ns));
			json_object_object_add(o, "pci", json_object_new_string(pci));
			json_object_array_add(ns_list, o);
		}
	}
	check(&c, count_ctrls() == ndrives, "nvme-controller-count",
	      "%d NVMe controllers, expected %d", count_ctrls(), ndrives);

	for (int waited = 0;; waited++) {
		char detail[512];
		int state = cloud_init_state(detail, sizeof(detail));

		if (state != 0 || waited >= ci_wait) {
			check(&c, state == 1, "cloud-init", "%s after %d s of waiting", detail, waited);
			break;
		}
		sleep(1);
	}
	if (hostname) {
		char h[256] = "";

		read_line("/proc/sys/kernel/hostname", h, sizeof(h));
		check(&c, !strcmp(h, hostname), "hostname", "%s, expected %s", h, hostname);
	}

	findings = findings_scan(0, 8);
	check(&c, json_object_array_length(findings) == 0, "kernel-log-clean",
	      "%zu finding(s)", json_object_array_length(findings));

	json_object_object_add(out, "release", json_object_new_string(u.release));
	json_object_object_add(out, "namespaces", ns_list);
	json_object_object_add(out, "checks", c.list);
	json_object_object_add(out, "findings", findings);
	free(slot_arg);
	return c.failed ? 1 : 0;
}
