/* labprobe dpc: what Downstream Port Containment did at slots' root ports
 * (the fidelity platform with lab_dpc: qemu patch 0007).
 *
 *   labprobe dpc --arm
 *   labprobe dpc --slots N,... [--collect] [--since-seq SEQ]
 *                [--expect-contained K] [--expect-no-recovery]
 *
 * For each slot's port, from its config space file (extended space, so the
 * guest needs ECAM): the DPC capability's Control and Status and the AER
 * Uncorrectable Error Status. Checks: DPC is there and the kernel enabled
 * it (trigger on fatal errors, interrupt) (check dpc-enabled); the port is
 * not contained any more (Trigger Status clear: check released) and its
 * Surprise Down status was cleared (check sdn-cleared).
 * --arm (reports the kernel log's last sequence number) puts counting kprobes (group ldpc) on dpc_handler() (one run for
 * each containment the DPC driver handled) and dpc_process_error() (a
 * containment taken through error recovery: the fatal error print, the
 * drivers' error handlers, the link reset). --collect reports their hits
 * and removes them; --expect-contained K checks that K containments were
 * handled (check contained), --expect-no-recovery that none went through
 * error recovery (check no-recovery: kernel patch 0010 leaves a hot
 * removal's Surprise Down to pciehp). --since-seq adds the kernel log's DPC
 * and error-recovery lines since SEQ. */
#include "labprobe.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXT_CAP_AER		0x01
#define EXT_CAP_DPC		0x1d
#define AER_UNCOR_STATUS	0x04
#define AER_UNC_SURPDN		0x00000020u
#define DPC_CTL			0x06
#define DPC_STATUS		0x08
#define DPC_CTL_EN_FATAL	0x0001
#define DPC_CTL_INT_EN		0x0008
#define DPC_STATUS_TRIGGER	0x0001

static const struct kprobe_def dpc_probes[] = {
	{ "dpc_handler", "dpc_handler" },
	{ "dpc_process_error", "dpc_process_error" },
};
#define NDPC_PROBES (sizeof(dpc_probes) / sizeof(dpc_probes[0]))

struct port_dpc {
	char port[32];
	int dpc, aer;
	uint16_t ctl, sta;
	uint32_t uncor;
	bool regs;
};

static void look(const char *slot, struct port_dpc *p)
{
	uint8_t cfg[4096];
	int bus = slot_bus(slot);

	memset(p, 0, sizeof(*p));
	if (bus < 0 || !slot_port(bus, p->port, sizeof(p->port)))
		return;
	p->regs = pci_config_read(p->port, cfg, sizeof(cfg)) == (ssize_t)sizeof(cfg);
	if (!p->regs)
		return;
	if ((p->dpc = pci_find_ext_cap(cfg, sizeof(cfg), EXT_CAP_DPC))) {
		memcpy(&p->ctl, cfg + p->dpc + DPC_CTL, 2);
		memcpy(&p->sta, cfg + p->dpc + DPC_STATUS, 2);
	}
	if ((p->aer = pci_find_ext_cap(cfg, sizeof(cfg), EXT_CAP_AER)))
		memcpy(&p->uncor, cfg + p->aer + AER_UNCOR_STATUS, 4);
}

static struct json_object *hex(unsigned v, int width)
{
	char b[16];

	snprintf(b, sizeof(b), "0x%0*x", width, v);
	return json_object_new_string(b);
}

int cmd_dpc(int argc, char **argv, struct json_object *out)
{
	enum { OPT_ARM = OPT_FIRST, OPT_COLLECT, OPT_NO_RECOVERY, OPT_SLOTS, OPT_CONTAINED, OPT_SINCE_SEQ };
	static const struct option opts[] = {
		{ "arm", no_argument, NULL, OPT_ARM },
		{ "collect", no_argument, NULL, OPT_COLLECT },
		{ "expect-no-recovery", no_argument, NULL, OPT_NO_RECOVERY },
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "expect-contained", required_argument, NULL, OPT_CONTAINED },
		{ "since-seq", required_argument, NULL, OPT_SINCE_SEQ },
		{ NULL, 0, NULL, 0 },
	};
	char *slots_arg = NULL, *names[256];
	bool arm = false, collect = false, no_recovery = false, since_given = false;
	long since = 0, contained = -1;
	int nslots = 0, opt;
	struct checks c;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_ARM:
			arm = true;
			break;
		case OPT_COLLECT:
			collect = true;
			break;
		case OPT_NO_RECOVERY:
			no_recovery = true;
			break;
		case OPT_SLOTS:
			slots_arg = optarg;
			if ((nslots = parse_slots("--slots", slots_arg, names, 256)) < 0)
				return 2;
			break;
		case OPT_CONTAINED:
			if (parse_long_opt("--expect-contained", optarg, 0, 1000000, &contained))
				return 2;
			break;
		case OPT_SINCE_SEQ:
			if (parse_long_opt("--since-seq", optarg, 0, LONG_MAX, &since))
				return 2;
			since_given = true;
			break;
		default:
			return 2;
		}
	}
	if (arm && argc != 2) {
		arg_error("--arm takes no other argument");
		return 2;
	}
	if (arm) {
		unsigned long long seq = kmsg_last_seq();

		/* where the kernel log stood: --collect --since-seq takes it;
		 * without it there is nothing to arm for */
		if (kmsg_error())
			return 1;
		json_object_object_add(out, "kmsg_last_seq", json_object_new_uint64(seq));
		return kprobes_arm("ldpc", dpc_probes, NDPC_PROBES, out);
	}
	if (!slots_arg || nslots == 0) {
		fprintf(stderr, "labprobe dpc: --slots N,... is required\n");
		return 2;
	}
	if ((contained >= 0 || no_recovery) && !collect) {
		fprintf(stderr, "labprobe dpc: --expect-contained and --expect-no-recovery go with --collect\n");
		return 2;
	}

	check_init(&c);
	struct json_object *arr = json_object_new_array();
	for (int i = 0; i < nslots; i++) {
		struct json_object *o = json_object_new_object();
		struct port_dpc p;

		look(names[i], &p);
		json_object_object_add(o, "slot", json_object_new_string(names[i]));
		json_object_object_add(o, "port", p.port[0] ? json_object_new_string(p.port) : NULL);
		json_object_object_add(o, "dpc_cap", p.dpc ? hex((unsigned)p.dpc, 3) : NULL);
		if (p.dpc) {
			json_object_object_add(o, "dpc_control", hex(p.ctl, 4));
			json_object_object_add(o, "dpc_status", hex(p.sta, 4));
		}
		if (p.aer)
			json_object_object_add(o, "aer_uncor_status", hex(p.uncor, 8));
		json_object_array_add(arr, o);
		check(&c, p.dpc && (p.ctl & (DPC_CTL_EN_FATAL | DPC_CTL_INT_EN)) == (DPC_CTL_EN_FATAL | DPC_CTL_INT_EN),
		      "dpc-enabled", "slot %s: port %s DPC capability %s, control 0x%04x", names[i],
		      p.port[0] ? p.port : "not found", p.dpc ? "present" : (p.regs ? "absent" : "unreadable"), p.ctl);
		check(&c, p.dpc && !(p.sta & DPC_STATUS_TRIGGER), "released",
		      "slot %s: port %s DPC status 0x%04x (Trigger Status %s)", names[i], p.port, p.sta,
		      p.sta & DPC_STATUS_TRIGGER ? "set: still contained" : "clear");
		check(&c, p.aer && !(p.uncor & AER_UNC_SURPDN), "sdn-cleared",
		      "slot %s: port %s AER Uncorrectable Error Status 0x%08x", names[i], p.port, p.uncor);
	}
	json_object_object_add(out, "ports", arr);
	if (collect) {
		long long hits[NDPC_PROBES];
		bool armed = kprobes_collect("ldpc", dpc_probes, NDPC_PROBES, hits, out);

		check(&c, armed, "probes-armed", "ldpc kprobes %s (labprobe dpc --arm first)",
		      armed ? "were armed" : "were not armed");
		if (contained >= 0)
			check(&c, hits[0] == contained, "contained", "the DPC driver handled %lld containment(s), %ld expected",
			      hits[0], contained);
		if (no_recovery)
			check(&c, hits[1] == 0, "no-recovery",
			      "%lld containment(s) went through error recovery (dpc_process_error)", hits[1]);
	}
	if (since_given) {
		json_object_object_add(out, "dpc_log", kmsg_lines((unsigned long long)since, "DPC", 200));
		json_object_object_add(out, "recovery_log", kmsg_lines((unsigned long long)since, "recovery", 200));
		json_object_object_add(out, "frozen_log", kmsg_lines((unsigned long long)since, "frozen state", 200));
	}
	json_object_object_add(out, "checks", c.list);
	return c.failed ? 1 : 0;
}
