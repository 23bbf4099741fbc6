/* labprobe collect: the second half of the hot-removal measurement (arm.c
 * is the first), the same on every kernel variant; with the parsing of
 * arm's trace.
 *
 *   labprobe collect --dir D [--expect-gone N,...] [--expect-kept N,... [--observe S] [--aer]]
 *                    [--timeout S] [--fio-timeout S]
 *
 * collect waits until the named slots are empty, reads the
 * trace and reports per slot, relative to the first pciehp hard interrupt
 * of the yank: (a) handled by pciehp, (b) marked disconnected, (c) nvme
 * unbound, (d) pci_dev removed, (e) block device gone, and when fio saw
 * its error. Events are attributed to slots by the pciehp IRQ thread they
 * ran in (irq/<N>-pciehp), by interrupt number, or by device name; an
 * nvme unbind by the device whose driver the thread is releasing. A slot
 * below a switch (a JBOF's downstream port) also takes the interrupt,
 * IRQ thread and tracepoints of the hotplug port above it (the JBOF's
 * root port), which handle it when the whole JBOF is yanked.
 * With --expect-kept (an error injected at the slots' ports, not a removal)
 * collect instead watches the named slots for S seconds and checks that
 * they kept their drive, were not torn down, and that their fio jobs went
 * on (or ended with a clean I/O error, never a verify mismatch or a
 * stall); with --aer (the error was an AER error at the slots' ports) it
 * also checks that the AER service recovered, from its own probes. Kept
 * slots without --aer are bystanders of a removal elsewhere (a JBOF yank).
 * Each yanked slot's record also has a "breakdown" of where its teardown
 * spent its time (lock wait and hold of pci_rescan_remove_lock, nvme
 * unbind in or outside it, the structural rest, the waits inside, the
 * IRQ thread's CPU time), and the top level teardown_cpu_ms, ncpus,
 * cpu_floor_ms, kprobe_missed and breakdown_note: breakdown.c's header
 * says what each is; cpu_window, what every CPU of the guest did from the
 * first interrupt to the last drive gone: window.c's header.
 * LABPROBE_TRACE=FILE makes collect read the trace from FILE
 * (kprobe_profile from FILE.profile) and leave tracefs alone
 * (a test hook). */
#include "labprobe.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* seconds a kept slot's fio may show no progress after the observation
 * window before it counts as stalled */
#define STALL_GRACE_S 10.0

/* fio_rc of a job that ended but whose error fio never reported (killed) */
#define FIO_UNREPORTED (-2)

enum { T_ISR, T_HANDLED, T_DISC, T_UNBIND, T_UNBOUND, T_PCIDEL, T_BLKDEL, T_N };
/* beyond the reported phases: pciehp_unconfigure_device in an IRQ thread */
#define T_UNCONF 8

/* The pci_hotplug tracepoints of the lab's patch series (patched kernel
 * only), and the kprobe time each is compared with. */
enum { TP_EVENT, TP_DISABLE_BEGIN, TP_DISCONNECTED, TP_DISABLE_END, TP_HP_EVENT, TP_N };
static const struct {
	const char *event;
	const char *name;
	int kprobe;
} tps[TP_N] = {
	{ "pciehp_slot_event", "isr", T_ISR },
	{ "pciehp_slot_disable_begin", "handled", T_HANDLED },
	{ "pciehp_dev_disconnected", "disconnected", T_DISC },
	/* ends after pciehp's 1 s wait once the slot is powered off: no
	 * kprobe phase matches it, it is reported but not compared */
	{ "pciehp_slot_disable_end", "slot_disabled", -1 },
	/* upstream's generic hotplug event (patch 0001, TRACE_SYSTEM pci):
	 * "pci_hp_event: 0000:00:02.0 slot:1, event:LINK_DOWN", fired in
	 * the IRQ thread as it handles the change; reported, not compared */
	{ "pci_hp_event", "hp_event", -1 },
};
/* AER service activity seen in the trace: first times and the last
 * recovery result (pci_ers_result_t: 5 = recovered, 4 = disconnect). */
static struct {
	double isr, rec_begin, rec_end, reset;
	int recoveries, resets, result;
} aer = { -1, -1, -1, -1, 0, 0, -1 };

static const char *t_names[T_N] = {
	"isr", "handled", "disconnected", "unbind_start", "unbound", "pci_removed", "blockdev_gone"
};

/* The earliest of the slot's kprobe phases after phase k that came after
 * kp, else kp: the end of the span phase k's tracepoint may lie in. */
static double next_phase(const struct slot *s, int k, double kp)
{
	double hi = kp;

	for (int j = k + 1; k >= 0 && kp >= 0 && j < T_N; j++)
		if (s->t[j] > kp && (hi == kp || s->t[j] < hi))
			hi = s->t[j];
	return hi;
}

int slot_from_json(struct json_object *o, struct slot *s)
{
	struct json_object *v, *a;

	memset(s, 0, sizeof(*s));
	for (int i = 0; i < 16; i++)
		s->t[i] = -1;
	for (int i = 0; i < 8; i++)
		s->tp[i] = -1;
	if (!json_object_object_get_ex(o, "slot", &v))
		return -1;
	scopy(s->name, sizeof(s->name), json_object_get_string(v));
	json_object_object_get_ex(o, "bus", &v);
	s->bus = json_object_get_int(v);
	json_object_object_get_ex(o, "port", &v);
	scopy(s->port, sizeof(s->port), json_object_get_string(v));
	json_object_object_get_ex(o, "irqs", &a);
	for (size_t i = 0; a && i < json_object_array_length(a) && i < 8; i++)
		s->irqs[s->nirqs++] = json_object_get_int(json_object_array_get_idx(a, i));
	if (json_object_object_get_ex(o, "above_port", &v))
		scopy(s->above, sizeof(s->above), json_object_get_string(v));
	if (json_object_object_get_ex(o, "above_slot", &v))
		scopy(s->above_slot, sizeof(s->above_slot), json_object_get_string(v));
	a = NULL;
	json_object_object_get_ex(o, "above_irqs", &a);
	for (size_t i = 0; a && i < json_object_array_length(a) && i < 8; i++)
		s->above_irqs[s->nabove++] = json_object_get_int(json_object_array_get_idx(a, i));
	json_object_object_get_ex(o, "ctrls", &a);
	for (size_t i = 0; a && i < json_object_array_length(a) && i < 4; i++)
		scopy(s->ctrls[s->nctrls++], 32, json_object_get_string(json_object_array_get_idx(a, i)));
	json_object_object_get_ex(o, "namespaces", &a);
	for (size_t i = 0; a && i < json_object_array_length(a) && i < 8; i++)
		scopy(s->nss[s->nns++], 32, json_object_get_string(json_object_array_get_idx(a, i)));
	s->fio = json_object_object_get_ex(o, "fio", &v) && json_object_get_boolean(v);
	return 0;
}

/* Is `irq` the slot's own port's (own) or that of the hotplug port above it? */
static bool slot_irq(const struct slot *s, int irq, bool own_only)
{
	for (int j = 0; j < s->nirqs; j++)
		if (s->irqs[j] == irq)
			return true;
	for (int j = 0; !own_only && j < s->nabove; j++)
		if (s->above_irqs[j] == irq)
			return true;
	return false;
}

/* phase k of every slot that irq (own or above) serves, at ts */
static void set_by_irq(struct slot *slots, int n, int irq, int k, double ts);

/* which slot's device each thread is releasing the driver of (lp_unbind) */
static struct {
	int pid, slot;
} unbinding[MAXS];
static int nunbinding;

static int *unbinding_slot(int pid)
{
	for (int i = 0; i < nunbinding; i++)
		if (unbinding[i].pid == pid)
			return &unbinding[i].slot;
	if (nunbinding == MAXS)
		return NULL;
	unbinding[nunbinding].pid = pid;
	unbinding[nunbinding].slot = -1;
	return &unbinding[nunbinding++].slot;
}

static int slot_by_devname(struct slot *slots, int n, const char *name)
{
	unsigned int dom, bus;

	if (sscanf(name, "%x:%x:", &dom, &bus) == 2 && strlen(name) == 12) {
		for (int i = 0; i < n; i++)
			if (slots[i].bus == (int)bus)
				return i;
		return -1;
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < slots[i].nns; j++)
			if (!strcmp(slots[i].nss[j], name))
				return i;
	return -1;
}

static void set_first(double *t, double v)
{
	if (*t < 0)
		*t = v;
}

static void set_by_irq(struct slot *slots, int n, int irq, int k, double ts)
{
	for (int i = 0; i < n; i++)
		if (slot_irq(&slots[i], irq, false))
			set_first(&slots[i].t[k], ts);
}

/* One trace line: "  comm-pid  [cpu] flags  ts: event: (...) args" */
static void parse_trace_line(char *line, struct slot *slots, int n, double armed)
{
	char *br = strstr(line, " ["), *close, *dash, *ev, *colon;
	char comm[64], event[64];
	double ts;
	int irq_thread = -1, s = -1, pid, cpu;
	char *end;
	long v;

	if (strstr(line, "LOST") && strstr(line, "EVENTS]")) {
		/* "CPU:1 [LOST 123 EVENTS]" */
		window_lost();
		return;
	}
	if (!br || line[0] == '#')
		return;
	if (!scan_long(br + 2, &end, 0, INT_MAX, &v))
		return;
	cpu = (int)v;
	*br = '\0';
	while (*line == ' ')
		line++;
	dash = strrchr(line, '-');
	if (!dash)
		return;
	*dash = '\0';
	if (!scan_long(dash + 1, &end, 0, INT_MAX, &v))
		return;
	pid = (int)v;
	scopy(comm, sizeof(comm), line);
	close = strchr(br + 1, ']');
	if (!close || sscanf(close + 1, " %*s %lf: %63[^:]:", &ts, event) != 2)
		return;
	if (ts < armed)
		return;
	ev = strstr(close + 1, event);
	colon = ev ? strchr(ev, ':') : NULL;
	if (window_event(cpu, ts, event, colon ? colon : ""))
		return;
	sscanf(comm, "irq/%d-pciehp", &irq_thread);
	if (breakdown_event(pid, irq_thread, ts, event))
		return;

	if (!strncmp(event, "pciehp_", 7)) {
		char *a = colon ? strstr(colon, "slot=") : NULL, name[32];

		if (!a || sscanf(a + 5, "%31s", name) != 1)
			return;
		/* pciehp_slot_event also fires for Command Completed alone */
		if (!strcmp(event, "pciehp_slot_event") && !strstr(colon, "PDC") && !strstr(colon, "DLLSC"))
			return;
		for (int i = 0; i < n; i++)
			if (!strcmp(slots[i].name, name) || !strcmp(slots[i].above_slot, name))
				for (int k = 0; k < TP_N; k++)
					if (!strcmp(event, tps[k].event))
						set_first(&slots[i].tp[k], ts);
		return;
	}
	if (!strcmp(event, "pci_hp_event")) {
		char *a = colon ? strstr(colon, " slot:") : NULL, name[32];

		if (!a || sscanf(a + 6, "%31[^,]", name) != 1)
			return;
		for (int i = 0; i < n; i++)
			if (!strcmp(slots[i].name, name) || !strcmp(slots[i].above_slot, name))
				set_first(&slots[i].tp[TP_HP_EVENT], ts);
		return;
	}
	if (!strcmp(event, "lp_aer")) {
		set_first(&aer.isr, ts);
		return;
	}
	if (!strcmp(event, "lp_rec")) {
		set_first(&aer.rec_begin, ts);
		aer.recoveries++;
		return;
	}
	if (!strcmp(event, "lp_rec_ret")) {
		char *a = colon ? strstr(colon, "ret=") : NULL;

		aer.rec_end = ts;	/* the last one */
		if (a && scan_long(a + 4, &end, 0, INT_MAX, &v))
			aer.result = (int)v;
		return;
	}
	if (!strcmp(event, "lp_reset")) {
		/* pci_slot_reset() asks first with probe=1: only probe=0 resets */
		if (colon && strstr(colon, "probe=0")) {
			set_first(&aer.reset, ts);
			aer.resets++;
		}
		return;
	}
	if (!strcmp(event, "lp_isr")) {
		char *a = colon ? strstr(colon, "irq=") : NULL;

		if (a && scan_long(a + 4, &end, 0, INT_MAX, &v))
			set_by_irq(slots, n, (int)v, T_ISR, ts);
	} else if (!strcmp(event, "lp_unbind")) {
		char *a = colon ? strstr(colon, "name=\"") : NULL, name[64];
		int *cur = unbinding_slot(pid);

		if (cur && a && sscanf(a + 6, "%63[^\"]", name) == 1)
			*cur = strlen(name) == 12 ? slot_by_devname(slots, n, name) : -1;
	} else if (irq_thread >= 0 && !strcmp(event, "lp_change")) {
		set_by_irq(slots, n, irq_thread, T_HANDLED, ts);
	} else if (irq_thread >= 0 && !strcmp(event, "lp_disc")) {
		set_by_irq(slots, n, irq_thread, T_DISC, ts);
	} else if (irq_thread >= 0 && !strcmp(event, "lp_unconf")) {
		/* marking happens first thing in pciehp_unconfigure_device; used
		 * when pci_dev_set_disconnected cannot be probed (it has several static copies) */
		set_by_irq(slots, n, irq_thread, T_UNCONF, ts);
	} else if (!strcmp(event, "lp_nvrm") || !strcmp(event, "lp_nvrm_ret")) {
		int *cur = unbinding_slot(pid);

		/* the device the thread is unbinding; else the slot whose own
		 * IRQ thread this is */
		s = cur ? *cur : -1;
		for (int i = 0; s < 0 && irq_thread >= 0 && i < n; i++)
			if (slot_irq(&slots[i], irq_thread, true))
				s = i;
		if (s >= 0)
			set_first(&slots[s].t[event[7] ? T_UNBOUND : T_UNBIND], ts);
		breakdown_unbind(pid, irq_thread, ts, s, event[7] != '\0');
	} else if (!strcmp(event, "lp_del")) {
		char *a = colon ? strstr(colon, "name=\"") : NULL, name[64];
		int d;

		if (!a || sscanf(a + 6, "%63[^\"]", name) != 1)
			return;
		d = slot_by_devname(slots, n, name);
		if (d < 0)
			return;
		if (!strncmp(name, "0000:", 5) && !strcmp(name + 7, ":00.0"))
			set_first(&slots[d].t[T_PCIDEL], ts);
		else if (!strncmp(name, "nvme", 4))
			set_first(&slots[d].t[T_BLKDEL], ts);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* A slot whose port took an error but whose drive must stay: still bound
 * with its namespaces, never torn down, its fio job went on or ended with
 * a plain I/O error. */
static void kept_checks(struct checks *c, struct slot *s, unsigned long long io_mid,
			struct json_object *o)
{
	bool present = bus_has_device(s->bus), torn = s->t[8] >= 0 || s->t[T_PCIDEL] >= 0;
	const char *outcome = "none";

	for (int j = 0; j < s->nctrls; j++)
		present = present && path_exists("/sys/class/nvme/%s", s->ctrls[j]);
	for (int j = 0; j < s->nns; j++)
		present = present && path_exists("/sys/block/%s", s->nss[j]);
	check(c, present, "slot-kept", "slot %s %s", s->name,
	      present ? "kept its controller and namespaces" : "lost its drive");
	check(c, !torn, "not-torn-down", "slot %s %s", s->name,
	      torn ? "was torn down by pciehp (unconfigure/pci_dev removal traced)" :
	      "not torn down");
	if (s->fio) {
		bool flowing = s->nns && ns_io(s->nss[0]) > io_mid + 16;

		if (s->fio_rc == -1)
			outcome = flowing ? "went-on" : "stalled";
		else if (s->fio_rc == FIO_UNREPORTED)
			outcome = "unreported";
		else if (s->fio_rc == 0)
			outcome = "completed";
		else
			outcome = s->fio_rc == EILSEQ ? "verify-failed" : "io-error";
		check(c, strcmp(outcome, "stalled") && strcmp(outcome, "verify-failed") &&
		      strcmp(outcome, "unreported"), "fio-survived",
		      "slot %s: fio %s (fio error %d)", s->name, outcome, s->fio_rc);
		json_object_object_add(o, "fio_error", json_object_new_int(s->fio_rc));
	}
	json_object_object_add(o, "kept", json_object_new_boolean(present));
	json_object_object_add(o, "torn_down", json_object_new_boolean(torn));
	json_object_object_add(o, "fio_outcome", json_object_new_string(outcome));
}

static struct json_object *ms_or_null(double t, double t0)
{
	return t >= 0 && t0 >= 0 ? json_object_new_double((t - t0) * 1e3) : NULL;
}

static struct json_object *aer_json(double t0, unsigned long long seq)
{
	struct json_object *o = json_object_new_object();

	if (t0 < 0)	/* no pciehp interrupt: the AER thread is t=0 */
		t0 = aer.isr;
	json_object_object_add(o, "isr_thread_ms", ms_or_null(aer.isr, t0));
	json_object_object_add(o, "recovery_begin_ms", ms_or_null(aer.rec_begin, t0));
	json_object_object_add(o, "recovery_end_ms", ms_or_null(aer.rec_end, t0));
	json_object_object_add(o, "slot_reset_ms", ms_or_null(aer.reset, t0));
	json_object_object_add(o, "recoveries", json_object_new_int(aer.recoveries));
	json_object_object_add(o, "slot_resets", json_object_new_int(aer.resets));
	json_object_object_add(o, "result", aer.result == 5 ? json_object_new_string("recovered") :
			       aer.result == 4 ? json_object_new_string("disconnect") :
			       aer.result > 0 ? json_object_new_int(aer.result) : NULL);
	json_object_object_add(o, "log", kmsg_lines(seq, "AER", 40));
	return o;
}

int cmd_collect(int argc, char **argv, struct json_object *out)
{
	enum { OPT_DIR = OPT_FIRST, OPT_GONE, OPT_KEPT, OPT_OBSERVE, OPT_AER, OPT_TIMEOUT, OPT_FIO_TIMEOUT };
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, OPT_DIR },
		{ "expect-gone", required_argument, NULL, OPT_GONE },
		{ "expect-kept", required_argument, NULL, OPT_KEPT },
		{ "observe", required_argument, NULL, OPT_OBSERVE },
		{ "aer", no_argument, NULL, OPT_AER },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "fio-timeout", required_argument, NULL, OPT_FIO_TIMEOUT },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = NULL;
	char *gone_names[MAXS], *kept_names[MAXS], path[300], *line = NULL;
	int ngone = 0, nkept = 0, nslots = 0, opt;
	double timeout = 60, fio_timeout = 60, observe = 10, armed, t0 = -1, start = now_mono();
	double last_gone = -1;
	bool kept[MAXS] = { false }, fio_ended[MAXS] = { false };
	unsigned long long io_mid[MAXS] = { 0 };
	static struct slot slots[MAXS];
	struct json_object *state, *arr, *v, *res, *findings;
	struct checks c;
	unsigned long long seq = 0;
	size_t cap = 0;
	FILE *f;
	bool tracepoints = false, expect_aer = false;
	double agree[TP_N] = { 0 };
	const char *trace;
	static struct bd_slot bd_in[MAXS];
	static struct json_object *bd_out[MAXS];

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_DIR:
			dir = optarg;
			if (check_path_opt("--dir", dir))
				return 2;
			break;
		case OPT_GONE:
			if ((ngone = parse_slots("--expect-gone", strdup(optarg), gone_names, MAXS)) < 0)
				return 2;
			break;
		case OPT_KEPT:
			if ((nkept = parse_slots("--expect-kept", strdup(optarg), kept_names, MAXS)) < 0)
				return 2;
			break;
		case OPT_OBSERVE:
			if (parse_double_opt("--observe", optarg, 0, TIMEOUT_MAX, &observe))
				return 2;
			break;
		case OPT_AER:
			expect_aer = true;
			break;
		case OPT_TIMEOUT:
			if (parse_double_opt("--timeout", optarg, 0, TIMEOUT_MAX, &timeout))
				return 2;
			break;
		case OPT_FIO_TIMEOUT:
			if (parse_double_opt("--fio-timeout", optarg, 0, TIMEOUT_MAX, &fio_timeout))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (!dir || (!ngone && !nkept)) {
		fprintf(stderr, "labprobe collect: --dir and --expect-gone or --expect-kept are required\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/state.json", dir);
	state = json_object_from_file(path);
	if (!state || !json_object_object_get_ex(state, "slots", &arr)) {
		fprintf(stderr, "labprobe collect: no %s: run labprobe arm first\n", path);
		return 2;
	}
	json_object_object_get_ex(state, "armed_at", &v);
	armed = json_object_get_double(v);
	json_object_object_get_ex(state, "kmsg_seq", &v);
	seq = json_object_get_uint64(v);
	tracepoints = json_object_object_get_ex(state, "tracepoints", &v) && json_object_get_boolean(v);
	for (size_t i = 0; i < json_object_array_length(arr) && nslots < MAXS; i++)
		slot_from_json(json_object_array_get_idx(arr, i), &slots[nslots++]);
	check_init(&c);
	for (int k = 0; k < nkept; k++) {
		int found = -1;

		for (int i = 0; i < nslots; i++)
			if (!strcmp(slots[i].name, kept_names[k]))
				found = i;
		if (found < 0) {
			fprintf(stderr, "labprobe collect: slot %s was not armed\n", kept_names[k]);
			json_object_put(state);
			return 2;
		}
		kept[found] = true;
	}

	for (int g = 0; g < ngone; g++) {
		bool found = false;

		for (int i = 0; i < nslots; i++)
			found |= !strcmp(slots[i].name, gone_names[g]);
		/* nothing would be checked of it */
		if (!found) {
			fprintf(stderr, "labprobe collect: --expect-gone slot %s was not armed\n", gone_names[g]);
			json_object_put(state);
			return 2;
		}
	}

	/* 1. wait until every expected slot is empty */
	for (;;) {
		int left = 0;

		for (int g = 0; g < ngone; g++)
			for (int i = 0; i < nslots; i++) {
				if (strcmp(slots[i].name, gone_names[g]) || slots[i].gone)
					continue;
				slots[i].gone = !bus_has_device(slots[i].bus);
				for (int j = 0; slots[i].gone && j < slots[i].nns; j++)
					slots[i].gone = !path_exists("/sys/block/%s", slots[i].nss[j]);
				left += !slots[i].gone;
			}
		if (!left || now_mono() - start > timeout)
			break;
		usleep(20000);
	}
	for (int g = 0; g < ngone; g++)
		for (int i = 0; i < nslots; i++)
			if (!strcmp(slots[i].name, gone_names[g]))
				check(&c, slots[i].gone, "slot-emptied", "slot %s %s", slots[i].name,
				      slots[i].gone ? "emptied" : "still holds a device after the timeout");

	/* 2. kept slots: watch them for the observation window, the last
	 * second of it measuring whether their I/O still flows */
	if (nkept) {
		double until = start + observe;

		sleep_s(until - 1 - now_mono());
		for (int i = 0; i < nslots; i++)
			io_mid[i] = kept[i] && slots[i].nns ? ns_io(slots[i].nss[0]) : 0;
		sleep_s(until - now_mono());
		/* a guest starved of CPU (a loaded TCG host) may do fewer than
		 * 16 I/Os in that second without a stall: give a slot that looks
		 * stalled up to STALL_GRACE_S more to show progress; a job that
		 * makes none in that time has stalled */
		for (double grace = now_mono() + STALL_GRACE_S; now_mono() < grace; usleep(250000)) {
			int quiet = 0;

			/* a job that ended is judged by how it ended, not here */
			for (int i = 0; i < nslots; i++)
				quiet += kept[i] && slots[i].fio && slots[i].nns &&
					 !path_exists("%.200s/fio-%.40s.end", dir, slots[i].name) &&
					 ns_io(slots[i].nss[0]) <= io_mid[i] + 16;
			if (!quiet)
				break;
		}
	}

	/* 3. wait for the fio jobs of the removed slots to end (close their
	 * drive); a kept slot's job is expected to run on */
	for (int i = 0; i < nslots; i++)
		slots[i].fio_rc = -1;
	for (double fstart = now_mono();;) {
		int left = 0;

		for (int i = 0; i < nslots; i++) {
			if (!slots[i].fio || fio_ended[i])
				continue;
			snprintf(path, sizeof(path), "%.200s/fio-%.40s.end", dir, slots[i].name);
			f = fopen(path, "r");
			fio_ended[i] = f && fscanf(f, "%lf", &slots[i].fio_end) == 1;
			left += !fio_ended[i] && !kept[i];
			if (f)
				fclose(f);
		}
		if (!left || now_mono() - fstart > fio_timeout)
			break;
		usleep(50000);
	}

	/* then stop fio: jobs still running are on drives that stayed, or
	 * hung on a removed one. SIGINT lets it end them and report every
	 * job's error; a fio that does not end within 10 s is killed. */
	if (json_object_object_get_ex(state, "fio_pgid", &v) && json_object_get_int(v) > 0) {
		pid_t pgid = json_object_get_int(v);

		snprintf(path, sizeof(path), "%.200s/fio.done", dir);
		kill(-pgid, SIGINT);
		for (int i = 0; i < 200 && !path_exists("%s", path) && kill(-pgid, 0) == 0; i++)
			usleep(50000);
		kill_fio_group(pgid);
	}
	for (int i = 0; i < nslots; i++) {
		int rc;

		if (!slots[i].fio || !fio_ended[i])
			continue;
		snprintf(path, sizeof(path), "%.200s/fio-%.40s.exit", dir, slots[i].name);
		f = fopen(path, "r");
		/* ended, but fio was killed before it could report: error unknown */
		slots[i].fio_rc = f && fscanf(f, "%d", &rc) == 1 ? rc : FIO_UNREPORTED;
		if (f)
			fclose(f);
	}

	/* 4. the trace; LABPROBE_TRACE=FILE reads it from FILE (and
	 * kprobe_profile from FILE.profile) and leaves tracefs alone: a test
	 * hook, to run collect on a host */
	trace = getenv("LABPROBE_TRACE");
	if (trace && !trace[0])
		trace = NULL;
	if (!trace)
		writef(INSTANCE "/tracing_on", "0");
	nunbinding = 0;
	breakdown_begin(json_object_object_get_ex(state, "probes", &v) ? v : NULL);
	window_begin();
	f = fopen(trace ? trace : INSTANCE "/trace", "r");
	while (f && getline(&line, &cap, f) > 0)
		parse_trace_line(line, slots, nslots, armed);
	if (f)
		fclose(f);
	free(line);
	snprintf(path, sizeof(path), "%.280s.profile", trace ? trace : "");
	breakdown_read_profile(trace ? path : TRACEFS "/kprobe_profile");
	if (!trace)
		probes_remove();

	/* 5. per-slot timeline, relative to the first hard interrupt */
	for (int i = 0; i < nslots; i++)
		if (slots[i].t[T_ISR] >= 0 && (t0 < 0 || slots[i].t[T_ISR] < t0))
			t0 = slots[i].t[T_ISR];
	res = json_object_new_array();
	if (ngone) {
		for (int i = 0; i < nslots; i++) {
			bd_in[i] = (struct bd_slot){ slots[i].irqs, slots[i].nirqs, slots[i].above_irqs,
						     slots[i].nabove, false };
			for (int g = 0; g < ngone; g++)
				bd_in[i].yanked |= !strcmp(slots[i].name, gone_names[g]);
		}
		breakdown_collect(json_object_object_get_ex(state, "breakdown", &v) ? v : NULL, bd_in, nslots,
				  bd_out, out);
	}
	{
		double gone_ms[MAXS];
		int ng = 0;

		for (int i = 0; i < nslots; i++) {
			struct json_object *o = json_object_new_object(), *tl = json_object_new_object();
			bool expected = false;

			for (int g = 0; g < ngone; g++)
				expected |= !strcmp(slots[i].name, gone_names[g]);
			if (slots[i].t[T_DISC] < 0)	/* see lp_unconf */
				slots[i].t[T_DISC] = slots[i].t[T_UNCONF];
			json_object_object_add(o, "slot", json_object_new_string(slots[i].name));
			json_object_object_add(o, "expected_gone", json_object_new_boolean(expected));
			json_object_object_add(o, "gone", json_object_new_boolean(slots[i].gone));
			for (int k = 0; k < T_N; k++)
				json_object_object_add(tl, t_names[k], slots[i].t[k] >= 0 && t0 >= 0 ?
						       json_object_new_double((slots[i].t[k] - t0) * 1e3) : NULL);
			if (slots[i].fio)
				json_object_object_add(tl, "fio_error", fio_ended[i] && t0 >= 0 ?
						       json_object_new_double((slots[i].fio_end - t0) * 1e3) : NULL);
			json_object_object_add(o, "ms", tl);
			if (tracepoints) {
				struct json_object *tpl = json_object_new_object();

				for (int k = 0; k < TP_N; k++) {
					double kp = tps[k].kprobe >= 0 ? slots[i].t[tps[k].kprobe] : -1;
					double tv = slots[i].tp[k], hi = kp, off;

					json_object_object_add(tpl, tps[k].name, tv >= 0 && t0 >= 0 ?
							       json_object_new_double((tv - t0) * 1e3) : NULL);
					/* Each tracepoint must lie between its kprobe and
					 * the slot's next kprobe phase, and is off by how
					 * far outside. "handled": the kprobe is the entry
					 * of pciehp_handle_presence_or_link_change(), the
					 * tracepoint comes after its state_lock and two
					 * log lines. "disconnected": the kprobe is
					 * pci_dev_set_disconnected()'s entry (or, where
					 * that cannot be probed, pciehp_unconfigure_device's),
					 * the tracepoint follows the mark; a TCG vCPU the
					 * host preempts, an interrupt, or pci_walk_bus()
					 * waiting for pci_bus_sem can put ms between the
					 * two (a CI canary run: 5.7 ms). */
					hi = next_phase(&slots[i], tps[k].kprobe, kp);
					off = tv < kp ? kp - tv : (tv > hi ? tv - hi : 0);
					if (expected && tv >= 0 && kp >= 0 && off * 1e3 > agree[k])
						agree[k] = off * 1e3;
					if (expected && tps[k].kprobe >= 0 && (tv < 0) != (kp < 0))
						agree[k] = INFINITY;
				}
				json_object_object_add(o, "tracepoint_ms", tpl);
			}
			if (slots[i].fio)
				json_object_object_add(o, "fio_rc", json_object_new_int(slots[i].fio_rc));
			if (kept[i])
				kept_checks(&c, &slots[i], io_mid[i], o);
			if (ngone && expected)
				json_object_object_add(o, "breakdown", bd_out[i]);
			json_object_array_add(res, o);
			if (expected && slots[i].fio)
				check(&c, slots[i].fio_rc > 0, "fio-ended-with-error",
				      "slot %s: fio %s", slots[i].name,
				      slots[i].fio_rc == -1 ? "still running (I/O hung?)" :
				      slots[i].fio_rc == FIO_UNREPORTED ?
				      "ended, but fio was killed before it reported (another job hung?)" :
				      slots[i].fio_rc == 0 ? "ended without an error" : "saw its I/O error");
			if (expected) {
				double g = slots[i].t[T_BLKDEL] > slots[i].t[T_PCIDEL] ?
					   slots[i].t[T_BLKDEL] : slots[i].t[T_PCIDEL];

				bool pci = slots[i].t[T_PCIDEL] >= 0, blk = !slots[i].nns || slots[i].t[T_BLKDEL] >= 0;

				/* both removals: a slot whose namespace outlived its
				 * pci_dev (or the other way round) is no clean removal */
				check(&c, pci && blk, "removal-traced", "slot %s: %s", slots[i].name,
				      pci && blk ? "pci_dev and block device removal traced" :
				      pci ? "pci_dev removal traced, no block device removal" :
				      blk ? "no pci_dev removal traced" : "no removal event traced");
				/* by pciehp: a surprise removal's presence or link
				 * change, or an orderly one's unconfigure, in the
				 * slot's (or the hotplug port above's) IRQ thread */
				check(&c, slots[i].t[T_HANDLED] >= 0 || slots[i].t[T_UNCONF] >= 0, "pciehp-handled",
				      "slot %s: %s", slots[i].name, slots[i].t[T_HANDLED] >= 0 || slots[i].t[T_UNCONF] >= 0 ?
				      "pciehp's IRQ thread tore it down" : "no pciehp IRQ thread handled its removal");
				if (g >= 0 && t0 >= 0) {
					gone_ms[ng++] = (g - t0) * 1e3;
					if (g > last_gone)
						last_gone = g;
				}
			}
		}
		if (ng) {
			qsort(gone_ms, ng, sizeof(double), cmp_double);
			json_object_object_add(out, "gone_p50_ms", json_object_new_double(gone_ms[ng / 2]));
			json_object_object_add(out, "gone_max_ms", json_object_new_double(gone_ms[ng - 1]));
		}
	}
	if (tracepoints && ngone) {
		struct json_object *ag = json_object_new_object();

		for (int k = 0; k < TP_N; k++)
			if (tps[k].kprobe >= 0)
				json_object_object_add(ag, tps[k].name, isfinite(agree[k]) ?
						       json_object_new_double(agree[k]) : NULL);
		/* largest |tracepoint - kprobe| over the yanked drives, per phase
		 * ("handled": how far outside its kprobe span, above); null when
		 * one method saw the phase and the other did not */
		json_object_object_add(out, "method_disagreement_ms", ag);
	}
	if (nkept && expect_aer) {
		check(&c, aer.recoveries > 0 && aer.result == 5, "aer-recovered",
		      "%d AER recovery run(s), last result %d (5 = recovered; -1: none traced)",
		      aer.recoveries, aer.result);
		json_object_object_add(out, "aer", aer_json(t0, seq));
	}
	json_object_object_add(out, "last_gone_ms", last_gone >= 0 && t0 >= 0 ?
			       json_object_new_double((last_gone - t0) * 1e3) : NULL);
	if (ngone) {
		const char *why;
		struct json_object *w = window_collect(json_object_object_get_ex(state, "cpu_window", &v) ?
						       v : NULL, t0, last_gone, &why);

		json_object_object_add(out, "cpu_window", w);
		if (!w)
			json_object_object_add(out, "cpu_window_error", json_object_new_string(why));
	}
	json_object_object_add(out, "clock", json_object_new_string(
		"CLOCK_MONOTONIC (tracefs trace_clock=mono), printed with 1 us resolution; "
		"t=0 is the first pciehp hard interrupt of the yank (or of the injected error: "
		"the port's services share one interrupt)"));
	json_object_object_add(out, "slots", res);
	findings = findings_scan(seq, 8);
	check(&c, json_object_array_length(findings) == 0, "kernel-log-clean", "%zu finding(s)",
	      json_object_array_length(findings));
	json_object_object_add(out, "findings", findings);
	json_object_object_add(out, "checks", c.list);
	if (json_object_object_get_ex(state, "hung_task_was", &v))
		write_str("/proc/sys/kernel/hung_task_timeout_secs", json_object_get_string(v));
	json_object_put(state);
	return c.failed ? 1 : 0;
}
