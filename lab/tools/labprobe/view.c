/* labprobe view: what the guest sees in each slot, and stale state.
 *
 *   labprobe view --slots N,... [--since-seq SEQ] [--expect SLOT=SERIAL|SLOT=empty,...]
 *                 [--timeout S] [--log [LINES]]
 *
 * For each slot: its bus and port, the PCI functions on the slot's bus and
 * the driver bound to each, the NVMe controllers whose PCI device sits on
 * that bus (serial, state) and their namespace block devices. Stale state
 * fails the view: a PCI function present without a driver, an NVMe
 * controller whose PCI device is gone (anywhere, not only in the slots) or
 * that is dead/deleting. With --expect, each named slot must hold exactly
 * one bound controller with that serial and a namespace block device, or
 * (empty) nothing at all. With --since-seq, kernel log findings after that
 * sequence number fail it too (without it the log is not judged: the
 * caller takes kmsg_last_seq from this first view). --timeout S repeats the
 * look until every check holds or S seconds passed (the report is the last
 * look). --log adds the kernel log lines after SEQ (the last LINES, default
 * 200) for the record. */
#include "labprobe.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXV 256

/* The driver bound to PCI function `dev` ("" if none). */
static void pci_driver(const char *dev, char *drv, size_t len)
{
	link_base(drv, len, "/sys/bus/pci/devices/%s/driver", dev);
}

/* What function `dev` answers in config space now (Vendor/Device ID dword,
 * Class Code << 8 | Revision dword). false if it does not answer (removed,
 * marked disconnected, all ones). */
static bool pci_live_ids(const char *dev, uint32_t *ids, uint32_t *class_rev)
{
	uint32_t w[3];

	if (pci_config_read(dev, w, sizeof(w)) != (ssize_t)sizeof(w) || w[0] == 0xffffffffu)
		return false;
	*ids = w[0];
	*class_rev = w[2];
	return true;
}

/* PCI function of an NVMe controller (from its device link), "" if none. */
static void ctrl_pci(const char *ctrl, char *dev, size_t len)
{
	link_base(dev, len, "/sys/class/nvme/%s/device", ctrl);
}

static bool ctrl_state_stale(const char *state)
{
	return !strncmp(state, "dead", 4) || !strncmp(state, "deleting", 8);
}

/* One look at a slot; adds its object to `arr`, checks to c. */
static void view_slot(const char *name, const char *expect, struct json_object *arr, struct checks *c)
{
	struct json_object *o = json_object_new_object(), *pa = json_object_new_array(), *ca;
	char port[32] = "", prefix[32], ctrls[8][32];
	int bus = slot_bus(name), npci = 0, unbound = 0, nc = 0, bound_nvme = 0;
	DIR *d;
	struct dirent *e;
	char serial[64] = "", ns_first[32] = "";

	json_object_object_add(o, "slot", json_object_new_string(name));
	json_object_object_add(o, "bus", json_object_new_int(bus));
	if (bus >= 0 && slot_port(bus, port, sizeof(port)))
		json_object_object_add(o, "port", json_object_new_string(port));
	else
		json_object_object_add(o, "port", NULL);
	check(c, bus >= 0, "slot-known", "slot %s: %s", name, bus >= 0 ? "known" : "no /sys/bus/pci/slots entry");

	/* PCI functions on the slot's bus */
	snprintf(prefix, sizeof(prefix), "0000:%02x:", bus);
	d = bus >= 0 ? opendir("/sys/bus/pci/devices") : NULL;
	while (d && (e = readdir(d))) {
		struct json_object *f;
		char drv[64], ids[32] = "", v[16] = "", dv[16] = "", cls[16] = "";

		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		npci++;
		pci_driver(e->d_name, drv, sizeof(drv));
		read_linef(v, sizeof(v), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		read_linef(dv, sizeof(dv), "/sys/bus/pci/devices/%s/device", e->d_name);
		read_linef(cls, sizeof(cls), "/sys/bus/pci/devices/%s/class", e->d_name);
		snprintf(ids, sizeof(ids), "%s:%s", v, dv);
		f = json_object_new_object();
		json_object_object_add(f, "dev", json_object_new_string(e->d_name));
		json_object_object_add(f, "ids", json_object_new_string(ids));
		json_object_object_add(f, "class", json_object_new_string(cls));
		json_object_object_add(f, "driver", drv[0] ? json_object_new_string(drv) : NULL);
		/* The kernel's pci_dev keeps the IDs read at enumeration; a device
		 * swapped behind its back answers with others. */
		uint32_t live, class_rev;
		if (pci_live_ids(e->d_name, &live, &class_rev)) {
			char lids[32], lcls[16];
			snprintf(lids, sizeof(lids), "0x%04x:0x%04x", live & 0xffff, live >> 16);
			snprintf(lcls, sizeof(lcls), "0x%06x", class_rev >> 8);
			json_object_object_add(f, "live_ids", json_object_new_string(lids));
			json_object_object_add(f, "live_class", json_object_new_string(lcls));
			check(c, !strcmp(lids, ids) && !strcmp(lcls, cls), "pci-identity",
			      "slot %s: PCI function %s: the kernel has it as %s class %s, the device answers "
			      "%s class %s%s", name, e->d_name, ids, cls, lids, lcls,
			      !strcmp(lids, ids) && !strcmp(lcls, cls) ? "" : " (replaced behind the kernel's back)");
		}
		json_object_array_add(pa, f);
		if (!drv[0])
			unbound++;
		check(c, drv[0] != '\0', "no-stale-pci-dev", "slot %s: PCI function %s (%s) %s%s", name, e->d_name,
		      ids, drv[0] ? "bound to " : "has no driver bound (stale)", drv);
	}
	if (d)
		closedir(d);
	json_object_object_add(o, "pci", pa);

	/* NVMe controllers on the bus */
	ca = json_object_new_array();
	nc = bus >= 0 ? bus_ctrls(bus, ctrls, 8) : 0;
	for (int i = 0; i < nc; i++) {
		struct json_object *co = json_object_new_object(), *na = json_object_new_array();
		char ser[64] = "", state[32] = "", dev[64], nss[8][32];
		int nn = ctrl_namespaces(ctrls[i], nss, 8);
		bool pci_there, blk = false;

		ctrl_serial(ctrls[i], ser, sizeof(ser));
		read_linef(state, sizeof(state), "/sys/class/nvme/%s/state", ctrls[i]);
		ctrl_pci(ctrls[i], dev, sizeof(dev));
		pci_there = dev[0] && path_exists("/sys/bus/pci/devices/%s", dev);
		for (int k = 0; k < nn; k++) {
			bool b = path_exists("/sys/block/%s", nss[k]) && path_exists("/dev/%s", nss[k]);
			json_object_array_add(na, json_object_new_string(nss[k]));
			if (b && !blk && !ns_first[0])
				scopy(ns_first, sizeof(ns_first), nss[k]);
			blk |= b;
		}
		json_object_object_add(co, "name", json_object_new_string(ctrls[i]));
		json_object_object_add(co, "serial", json_object_new_string(ser));
		json_object_object_add(co, "state", json_object_new_string(state));
		json_object_object_add(co, "pci_dev", json_object_new_string(dev));
		json_object_object_add(co, "pci_dev_present", json_object_new_boolean(pci_there));
		json_object_object_add(co, "namespaces", na);
		json_object_object_add(co, "blockdev_present", json_object_new_boolean(blk));
		json_object_array_add(ca, co);
		if (pci_there && !strcmp(state, "live"))
			bound_nvme++;
		if (!serial[0])
			scopy(serial, sizeof(serial), ser);
	}
	json_object_object_add(o, "nvme", ca);
	json_object_object_add(o, "occupied", json_object_new_boolean(npci > 0));
	json_object_object_add(o, "bound", json_object_new_boolean(npci > 0 && !unbound));
	json_object_object_add(o, "serial", nc ? json_object_new_string(serial) : NULL);
	json_object_object_add(o, "namespace", ns_first[0] ? json_object_new_string(ns_first) : NULL);

	if (expect) {
		bool ok;
		char detail[300];

		if (!strcmp(expect, "empty")) {
			ok = npci == 0 && nc == 0;
			snprintf(detail, sizeof(detail), "%d PCI function(s), %d NVMe controller(s)", npci, nc);
		} else {
			ok = npci == 1 && !unbound && nc == 1 && bound_nvme == 1 && !strcmp(serial, expect) &&
			     ns_first[0];
			snprintf(detail, sizeof(detail), "%d PCI function(s)%s, %d controller(s), serial %s, "
				 "namespace %s", npci, unbound ? " (unbound)" : "", nc, nc ? serial : "-",
				 ns_first[0] ? ns_first : "none");
		}
		json_object_object_add(o, "expected", json_object_new_string(expect));
		json_object_object_add(o, "as_expected", json_object_new_boolean(ok));
		check(c, ok, "slot-as-expected", "slot %s: expected %s, guest sees %s", name, expect, detail);
	}
	json_object_array_add(arr, o);
}

/* Controllers anywhere whose PCI device is gone, or that are dead/deleting. */
static void stale_ctrls(struct json_object *out, struct checks *c)
{
	struct json_object *arr = json_object_new_array();
	DIR *d = opendir("/sys/class/nvme");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char dev[64], state[32] = "";
		bool there;

		if (e->d_name[0] == '.')
			continue;
		ctrl_pci(e->d_name, dev, sizeof(dev));
		read_linef(state, sizeof(state), "/sys/class/nvme/%s/state", e->d_name);
		there = dev[0] && path_exists("/sys/bus/pci/devices/%s", dev);
		if (there && !ctrl_state_stale(state))
			continue;
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(e->d_name));
		json_object_object_add(o, "pci_dev", json_object_new_string(dev));
		json_object_object_add(o, "pci_dev_present", json_object_new_boolean(there));
		json_object_object_add(o, "state", json_object_new_string(state));
		json_object_array_add(arr, o);
		check(c, false, "no-stale-nvme-ctrl", "%s (state %s): %s", e->d_name, state,
		      there ? "dead or being deleted" : "its PCI device is gone");
	}
	if (d)
		closedir(d);
	json_object_object_add(out, "stale_nvme", arr);
}

int cmd_view(int argc, char **argv, struct json_object *out)
{
	enum { OPT_SLOTS = OPT_FIRST, OPT_SINCE_SEQ, OPT_EXPECT, OPT_TIMEOUT, OPT_LOG };
	static const struct option opts[] = {
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "since-seq", required_argument, NULL, OPT_SINCE_SEQ },
		{ "expect", required_argument, NULL, OPT_EXPECT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "log", optional_argument, NULL, OPT_LOG },
		{ NULL, 0, NULL, 0 },
	};
	char *names[MAXV], *expects[MAXV];
	const char *expect_for[MAXV] = { 0 }, *values[MAXV], *lines;
	int nslots = 0, nexp = 0, log_max = 0, opt;
	long since = 0;
	bool since_given = false;
	double timeout = 0, start = now_mono();
	struct json_object *slots = NULL, *findings = NULL;
	struct checks c = { 0 };
	int looks = 0;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_SLOTS:
			if ((nslots = parse_slots("--slots", strdup(optarg), names, MAXV)) < 0)
				return 2;
			break;
		case OPT_SINCE_SEQ:
			if (parse_long_opt("--since-seq", optarg, 0, LONG_MAX, &since))
				return 2;
			since_given = true;
			break;
		case OPT_EXPECT:
			if ((nexp = parse_slot_values("--expect", strdup(optarg), expects, values, MAXV, false)) < 0)
				return 2;
			break;
		case OPT_TIMEOUT:
			if (parse_double_opt("--timeout", optarg, 0, TIMEOUT_MAX, &timeout))
				return 2;
			break;
		case OPT_LOG:
			log_max = 200;
			/* LINES is optional: --log=LINES, or a next argument that
			 * starts like a number (getopt_long leaves that one to us) */
			lines = optarg;
			if (!lines && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9')
				lines = argv[optind++];
			if (lines && parse_int_opt("--log", lines, 0, 100000, &log_max))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (!nslots) {
		fprintf(stderr, "labprobe view: --slots N,... is required\n");
		return 2;
	}
	for (int k = 0; k < nexp; k++) {
		int hit = -1;

		if (!values[k][0]) {
			fprintf(stderr, "labprobe view: --expect takes SLOT=SERIAL or SLOT=empty, got '%s='\n",
				expects[k]);
			return 2;
		}
		for (int i = 0; i < nslots; i++)
			if (!strcmp(names[i], expects[k]))
				hit = i;
		if (hit < 0) {
			fprintf(stderr, "labprobe view: --expect names slot %s, which --slots does not list\n",
				expects[k]);
			return 2;
		}
		expect_for[hit] = values[k];
	}

	/* look until every check holds or the timeout passed */
	for (;;) {
		if (slots) {
			json_object_put(slots);
			json_object_put(c.list);
			json_object_put(findings);
		}
		check_init(&c);
		looks++;
		slots = json_object_new_array();
		for (int i = 0; i < nslots; i++)
			view_slot(names[i], expect_for[i], slots, &c);
		stale_ctrls(out, &c);
		findings = findings_check(&c, since_given, since);
		if (!c.failed || now_mono() - start >= timeout)
			break;
		usleep(200000);
	}
	json_object_object_add(out, "slots", slots);
	json_object_object_add(out, "looks", json_object_new_int(looks));
	json_object_object_add(out, "seconds", json_object_new_double((double)(long)((now_mono() - start) * 1000) / 1000));
	json_object_object_add(out, "kmsg_last_seq", kmsg_last_seq_json());
	json_object_object_add(out, "since_seq", since_given ? json_object_new_uint64((uint64_t)since) : NULL);
	json_object_object_add(out, "findings", findings);
	if (log_max > 0)
		json_object_object_add(out, "log", kmsg_lines((unsigned long long)since, NULL, log_max));
	json_object_object_add(out, "checks", c.list);
	return c.failed ? 1 : 0;
}
