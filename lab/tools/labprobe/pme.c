/* labprobe pme: what the PCIe PME service has left enabled at a slot's root
 * port, read without waking the port.
 *
 *   labprobe pme --arm
 *   labprobe pme --slots N,... [--wait-suspended S] [--expect-pmeie on|off]
 *                [--collect [--expect-pme-untouched]]
 *
 * For each slot's port: its runtime PM status and power state (sysfs), its
 * Root Control register (PME Interrupt Enable) and Root Status (PME Status,
 * PME Pending) read from its config space file, and its interrupt vectors.
 * Config reads through sysfs do not runtime-resume a port that is not in
 * D3cold (pci_config_pm_runtime_get()), so a suspended port stays
 * suspended. --wait-suspended S polls until every port is runtime
 * suspended (check port-suspended), at most S seconds. --expect-pmeie
 * checks PME Interrupt Enable (check pmeie); QEMU 7.2 does not let the
 * guest set that bit (its Root Control write mask has only the System Error
 * enables), so on the lab's QEMU it reads 0 whatever the kernel does.
 *
 * What the kernel does is seen with kprobes instead: --arm registers them
 * (group lpme, enabled in tracefs instance lpme: hits are counted in
 * kprobe_profile, nothing is traced) on pcie_pme_interrupt_enable() (every
 * change of a port's PME Interrupt Enable by the PME service, with its
 * enable argument), pcie_port_device_runtime_suspend() and
 * pcie_port_device_runtime_resume() (portdrv's runtime PM of a port: they
 * call the services' runtime callbacks) and pcie_pme_work_fn() (the PME
 * service handling a PME its port signalled: what wakes a suspended port on
 * a hot-add when the port has PME). --collect reports the hits and removes
 * them; --expect-pme-untouched checks that ports did runtime-suspend
 * (port_runtime_suspend hits) and that the PME service left the interrupt
 * enable alone meanwhile (no pme_interrupt_enable hit): 6.1 has no PME
 * service runtime PM callbacks; upstream 4.20's (reverted in 5.0) disabled
 * the interrupt on runtime suspend. */
#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define CAP_ID_EXP	0x10
#define EXP_RTCTL	0x1c	/* Root Control */
#define EXP_RTSTA	0x20	/* Root Status */
#define RTCTL_PMEIE	0x0008
#define RTSTA_PME	0x00010000u
#define RTSTA_PENDING	0x00020000u

static const struct kprobe_def pme_probes[] = {
	{ "pme_interrupt_enable", "pcie_pme_interrupt_enable enable=%si:u8" },
	{ "port_runtime_suspend", "pcie_port_device_runtime_suspend" },
	{ "port_runtime_resume", "pcie_port_device_runtime_resume" },
	{ "pme_work", "pcie_pme_work_fn" },
};
#define NPME_PROBES (sizeof(pme_probes) / sizeof(pme_probes[0]))

struct port_pme {
	char port[32], runtime[32], power[32];
	int exp, irqs[8], nirqs;
	uint16_t rtctl;
	uint32_t rtsta;
	bool regs;
};

static void look(const char *slot, struct port_pme *p)
{
	uint8_t cfg[256];
	int bus = slot_bus(slot);

	memset(p, 0, sizeof(*p));
	if (bus < 0 || !slot_port(bus, p->port, sizeof(p->port)))
		return;
	read_linef(p->runtime, sizeof(p->runtime), "/sys/bus/pci/devices/%s/power/runtime_status", p->port);
	read_linef(p->power, sizeof(p->power), "/sys/bus/pci/devices/%s/power_state", p->port);
	p->nirqs = port_irqs(p->port, p->irqs, 8);
	if (pci_config_read(p->port, cfg, sizeof(cfg)) != (ssize_t)sizeof(cfg) ||
	    !(p->exp = pci_find_cap(cfg, sizeof(cfg), CAP_ID_EXP)))
		return;
	memcpy(&p->rtctl, cfg + p->exp + EXP_RTCTL, 2);
	memcpy(&p->rtsta, cfg + p->exp + EXP_RTSTA, 4);
	p->regs = true;
}

int cmd_pme(int argc, char **argv, struct json_object *out)
{
	enum { OPT_ARM = OPT_FIRST, OPT_COLLECT, OPT_UNTOUCHED, OPT_SLOTS, OPT_WAIT_SUSPENDED, OPT_PMEIE };
	static const struct option opts[] = {
		{ "arm", no_argument, NULL, OPT_ARM },
		{ "collect", no_argument, NULL, OPT_COLLECT },
		{ "expect-pme-untouched", no_argument, NULL, OPT_UNTOUCHED },
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "wait-suspended", required_argument, NULL, OPT_WAIT_SUSPENDED },
		{ "expect-pmeie", required_argument, NULL, OPT_PMEIE },
		{ NULL, 0, NULL, 0 },
	};
	char *slots_arg = NULL, *names[64];
	const char *expect = NULL;
	double wait = 0;
	int nslots = 0, opt;
	struct checks c;

	bool arm = false, collect = false, untouched = false;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_ARM:
			arm = true;
			break;
		case OPT_COLLECT:
			collect = true;
			break;
		case OPT_UNTOUCHED:
			untouched = true;
			break;
		case OPT_SLOTS:
			slots_arg = optarg;
			if ((nslots = parse_slots("--slots", slots_arg, names, 64)) < 0)
				return 2;
			break;
		case OPT_WAIT_SUSPENDED:
			if (parse_double_opt("--wait-suspended", optarg, 0, TIMEOUT_MAX, &wait))
				return 2;
			break;
		case OPT_PMEIE:
			expect = optarg;
			break;
		default:
			return 2;
		}
	}
	if (arm && argc != 2) {
		arg_error("--arm takes no other argument");
		return 2;
	}
	if (arm)
		return kprobes_arm("lpme", pme_probes, NPME_PROBES, out);
	if (!slots_arg || nslots == 0) {
		fprintf(stderr, "labprobe pme: --slots N,... is required\n");
		return 2;
	}
	if (expect && strcmp(expect, "on") && strcmp(expect, "off")) {
		fprintf(stderr, "labprobe pme: --expect-pmeie takes on or off, got '%s'\n", expect);
		return 2;
	}

	struct port_pme *p = calloc((size_t)nslots, sizeof(*p));
	double start = now_mono();
	bool all;

	do {
		all = true;
		for (int i = 0; i < nslots; i++) {
			look(names[i], &p[i]);
			all &= !strcmp(p[i].runtime, "suspended");
		}
		if (all || now_mono() - start >= wait)
			break;
		usleep(100000);
	} while (1);

	double waited = now_mono() - start;

	check_init(&c);
	struct json_object *arr = json_object_new_array();
	for (int i = 0; i < nslots; i++) {
		struct json_object *o = json_object_new_object(), *irqs = json_object_new_array();
		char b[16];

		json_object_object_add(o, "slot", json_object_new_string(names[i]));
		json_object_object_add(o, "port", p[i].port[0] ? json_object_new_string(p[i].port) : NULL);
		json_object_object_add(o, "runtime_status", json_object_new_string(p[i].runtime));
		json_object_object_add(o, "power_state", json_object_new_string(p[i].power));
		for (int k = 0; k < p[i].nirqs; k++)
			json_object_array_add(irqs, json_object_new_int(p[i].irqs[k]));
		json_object_object_add(o, "irqs", irqs);
		if (p[i].regs) {
			snprintf(b, sizeof(b), "0x%04x", p[i].rtctl);
			json_object_object_add(o, "root_control", json_object_new_string(b));
			snprintf(b, sizeof(b), "0x%08x", p[i].rtsta);
			json_object_object_add(o, "root_status", json_object_new_string(b));
			json_object_object_add(o, "pme_interrupt_enabled",
					       json_object_new_boolean(p[i].rtctl & RTCTL_PMEIE));
			json_object_object_add(o, "pme_status", json_object_new_boolean(p[i].rtsta & RTSTA_PME));
			json_object_object_add(o, "pme_pending", json_object_new_boolean(p[i].rtsta & RTSTA_PENDING));
		}
		json_object_array_add(arr, o);
		check(&c, p[i].regs, "port-readable", "slot %s: port %s, PCIe capability %s", names[i],
		      p[i].port[0] ? p[i].port : "not found", p[i].regs ? "read" : "not readable");
		if (wait > 0)
			check(&c, !strcmp(p[i].runtime, "suspended"), "port-suspended",
			      "slot %s: port %s runtime status %s after %.1f s", names[i], p[i].port, p[i].runtime,
			      waited);
		if (expect && p[i].regs)
			check(&c, !!(p[i].rtctl & RTCTL_PMEIE) == !strcmp(expect, "on"), "pmeie",
			      "slot %s: port %s (%s, %s): PME Interrupt Enable %s, expected %s", names[i], p[i].port,
			      p[i].runtime, p[i].power, p[i].rtctl & RTCTL_PMEIE ? "on" : "off", expect);
	}
	free(p);
	if (collect) {
		long long hits[NPME_PROBES];
		bool armed = kprobes_collect("lpme", pme_probes, NPME_PROBES, hits, out);

		check(&c, armed, "probes-armed", "lpme kprobes %s (labprobe pme --arm first)",
		      armed ? "were armed" : "were not armed");
		if (untouched) {
			check(&c, hits[1] > 0, "port-runtime-suspended",
			      "portdrv runtime-suspended a port %lld time(s)", hits[1]);
			check(&c, hits[0] == 0, "pme-untouched",
			      "the PME service changed a port's PME Interrupt Enable %lld time(s) meanwhile", hits[0]);
		}
	} else if (untouched) {
		fprintf(stderr, "labprobe pme: --expect-pme-untouched goes with --collect\n");
		return 2;
	}
	json_object_object_add(out, "ports", arr);
	json_object_object_add(out, "seconds", json_object_new_double((double)(long)(waited * 1000) / 1000));
	json_object_object_add(out, "checks", c.list);
	return c.failed ? 1 : 0;
}
