/* Where each yanked slot's teardown spends its time: labprobe arm and
 * collect (arm.c, collect.c) add, for every slot of --expect-gone, a
 * "breakdown" object to the slot's record:
 *
 *   thread, pid       the pciehp IRQ thread (irq/<N>-pciehp) that tore the
 *                     slot down: the one that ran pciehp_unconfigure_device
 *                     for it, its own port's, else the hotplug port's above
 *                     it (a JBOF's root port); null if none was traced
 *   thread_slots      how many yanked slots that thread tore down (1, or a
 *                     JBOF's drives): the thread's figures below are then
 *                     the same in each of them
 *   lock_wait_ms      time in pci_lock_rescan_remove() (entry to return) in
 *                     that thread, summed over its calls
 *   lock_held_ms      from each return of it to the next entry of
 *                     pci_unlock_rescan_remove() in the same thread
 *   unbind_ms         nvme_remove() entry to return, of the slot's device
 *                     (the device the thread releases the driver of, as the
 *                     unbind phase attributes it)
 *   unbind_in_lock    whether that nvme_remove() ran while its thread held
 *                     pci_rescan_remove_lock (a stock kernel) or not (the
 *                     patched kernel unbinds before taking it)
 *   structural_ms     lock_held_ms minus the nvme_remove() time the thread
 *                     spent inside the lock (never below 0)
 *   waits             for synchronize_rcu, synchronize_srcu,
 *                     blk_mq_freeze_queue_wait, free_irq, del_gendisk and
 *                     device_del: {"n": calls, "ms": summed time} of the
 *                     calls the thread made between arm and collect
 *   unfinished        calls entered with no return traced (a kretprobe
 *                     missed, or the thread still blocked at collect) and a
 *                     lock still held: the sums above leave them out
 *   cpu_ms            the thread's on-CPU time between arm and collect
 *                     (/proc/<pid>/schedstat, first field; with no
 *                     teardown traced, its own port's thread's); null when
 *                     the thread is gone or the kernel keeps no schedstat
 *
 * and to collect's top level: teardown_cpu_ms (cpu_ms summed over the
 * distinct threads of the yanked slots), ncpus (online CPUs), cpu_floor_ms
 * (teardown_cpu_ms / ncpus: the least wall time that CPU work takes on
 * this guest), kprobe_missed (kprobe_profile's missed count summed over
 * the probes that feed the breakdown; with kretprobes that can sleep in
 * 32 threads at once, returns are lost when more are pending than the
 * probe's maxactive) and breakdown_note.
 *
 * All times are inclusive, kprobe entry to kretprobe return in CLOCK_MONOTONIC
 * (the trace's mono clock, 1 us): nested calls count in each (device_del
 * inside del_gendisk, waits inside nvme_remove), so the waits do not add
 * up to anything. Every probe here is optional: one that cannot be placed
 * (inlined or missing on a kernel, e.g. Debian's) makes what it feeds null,
 * never 0, and arm does not fail. */
#include "labprobe.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the functions whose calls are counted in "waits" */
enum { W_RCU, W_SRCU, W_FREEZE, W_FREEIRQ, W_DELGD, W_DEVDEL, W_N };
static const char *const wait_fn[W_N] = {
	"synchronize_rcu", "synchronize_srcu", "blk_mq_freeze_queue_wait", "free_irq", "del_gendisk",
	"device_del",
};

/* up to 32 IRQ threads sleep in each at once (a bulk removal of 32 slots):
 * kretprobes with room for 128 pending returns (the kernel's default is
 * max(10, 2 * CPUs)) */
const struct lp_probe breakdown_probes[] = {
	{ "lp_bd_lock", "pci_lock_rescan_remove", "p", false },
	{ "lp_bd_lock_ret", "pci_lock_rescan_remove", "r128", false },
	{ "lp_bd_unlock", "pci_unlock_rescan_remove", "p", false },
	/* nvme_remove's entry is trace.c's lp_nvrm; its lp_nvrm_ret has the
	 * default maxactive */
	{ "lp_bd_nvrm_ret", "nvme_remove", "r128", false },
	{ "lp_bd_rcu", "synchronize_rcu", "p", false },
	{ "lp_bd_rcu_ret", "synchronize_rcu", "r128", false },
	{ "lp_bd_srcu", "synchronize_srcu", "p", false },
	{ "lp_bd_srcu_ret", "synchronize_srcu", "r128", false },
	{ "lp_bd_freeze", "blk_mq_freeze_queue_wait", "p", false },
	{ "lp_bd_freeze_ret", "blk_mq_freeze_queue_wait", "r128", false },
	{ "lp_bd_freeirq", "free_irq", "p", false },
	{ "lp_bd_freeirq_ret", "free_irq", "r128", false },
	{ "lp_bd_delgd", "del_gendisk", "p", false },
	{ "lp_bd_delgd_ret", "del_gendisk", "r128", false },
	{ "lp_bd_devdel", "device_del", "p", false },
	{ "lp_bd_devdel_ret", "device_del", "r128", false },
};
#define NBD (sizeof(breakdown_probes) / sizeof(breakdown_probes[0]))
const size_t breakdown_nprobes = NBD;
enum { P_LOCK, P_LOCK_RET, P_UNLOCK, P_NVRM_RET, P_WAIT0 };	/* indices above; wait w: P_WAIT0 + 2w (+1) */

/* trace.c's probes that feed the breakdown too */
static const char *const hotplug_probes[] = { "lp_nvrm", "lp_nvrm_ret" };

#define DEPTH 8	/* nested calls of one function in one thread */
#define MAXT 512	/* threads seen in the trace */
#define MAXSLOTS 256

struct frame {
	double ts;
	int slot;	/* nvme_remove: the slot it unbinds, -1 unknown */
	bool in_lock;
};

struct stack {
	struct frame f[DEPTH];
	int n, lost;	/* lost: entries deeper than DEPTH */
};

struct thread {
	int pid, irq;	/* irq: N of irq/N-pciehp; -1 for any other thread */
	bool unconf;	/* ran pciehp_unconfigure_device after arm */
	struct stack lock, wait[W_N], nvrm;
	double held_since;	/* return of pci_lock_rescan_remove, -1: not held */
	double lock_wait, lock_held, unbind_in_lock;	/* seconds */
	double wait_s[W_N];
	int wait_n[W_N];
};

static struct {
	bool placed[NBD + 2];	/* breakdown_probes[], then hotplug_probes[] */
	struct thread t[MAXT];
	int nt;
	double unbind[MAXSLOTS];
	int nunbind[MAXSLOTS];
	bool in_lock[MAXSLOTS];	/* one of its nvme_remove() calls ran in the lock */
	long long missed;	/* -1: kprobe_profile not read */
	struct json_object *missed_by;
} bd;

static bool placed(int i)
{
	return i >= 0 && (size_t)i < sizeof(bd.placed) && bd.placed[i];
}

static bool lock_traced(void)
{
	return placed(P_LOCK_RET) && placed(P_UNLOCK);
}

static bool nvrm_traced(void)
{
	/* lp_nvrm, and a return: ours or trace.c's */
	return placed((int)breakdown_nprobes) &&
	       (placed(P_NVRM_RET) || placed((int)breakdown_nprobes + 1));
}

static bool wait_traced(int w)
{
	return placed(P_WAIT0 + 2 * w) && placed(P_WAIT0 + 2 * w + 1);
}

/* ---- arm: the CPU time of the slots' pciehp IRQ threads ---- */

/* a task's start time (clock ticks after boot: /proc/PID/stat field 22),
 * which tells it from a later task with the same pid; -1 if gone */
static long long task_start(int pid)
{
	char buf[1024], *p;
	long long start = -1;
	FILE *f;
	size_t len;

	snprintf(buf, sizeof(buf), "/proc/%d/stat", pid);
	f = fopen(buf, "r");
	if (!f)
		return -1;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	p = strrchr(buf, ')');	/* the name may hold spaces and parentheses */
	if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %lld",
			&start) != 1)
		start = -1;
	return p ? start : -1;
}

/* on-CPU nanoseconds of task pid (schedstat's first field), -1 if unknown */
static long long task_cpu_ns(int pid)
{
	char line[128];
	long long ns;

	if (read_linef(line, sizeof(line), "/proc/%d/schedstat", pid) || sscanf(line, "%lld", &ns) != 1)
		return -1;
	return ns;
}

struct json_object *breakdown_arm(const int *irqs, int n)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	DIR *d = opendir("/proc");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char comm[64];
		int pid, irq, end = 0;
		long long start, ns;
		long v;
		bool ours = false;

		if (!scan_long(e->d_name, NULL, 1, INT_MAX, &v))
			continue;	/* not a process */
		pid = (int)v;
		/* irq/N-pciehp exactly: not irq/N-aerdrv, the port's other thread */
		if (read_linef(comm, sizeof(comm), "/proc/%d/comm", pid) ||
		    sscanf(comm, "irq/%d-pciehp%n", &irq, &end) != 1 || !end || comm[end])
			continue;
		for (int i = 0; i < n; i++)
			ours |= irqs[i] == irq;
		start = task_start(pid);
		ns = task_cpu_ns(pid);
		if (!ours || start < 0)
			continue;
		{
			struct json_object *t = json_object_new_object();

			json_object_object_add(t, "irq", json_object_new_int(irq));
			json_object_object_add(t, "pid", json_object_new_int(pid));
			json_object_object_add(t, "start", json_object_new_int64(start));
			json_object_object_add(t, "cpu_ns", ns >= 0 ? json_object_new_int64(ns) : NULL);
			json_object_array_add(a, t);
		}
	}
	if (d)
		closedir(d);
	json_object_object_add(o, "threads", a);
	return o;
}

/* ---- collect: the trace ---- */

void breakdown_begin(struct json_object *probes)
{
	struct json_object *v;

	memset(&bd, 0, sizeof(bd));
	bd.missed = -1;
	for (size_t i = 0; i < breakdown_nprobes + 2; i++) {
		const char *name = i < breakdown_nprobes ? breakdown_probes[i].name :
				   hotplug_probes[i - breakdown_nprobes];

		bd.placed[i] = probes && json_object_object_get_ex(probes, name, &v) &&
			       !strcmp(json_object_get_string(v), "ok");
	}
}

static struct thread *thread_of(int pid, int irq)
{
	struct thread *t;

	for (int i = 0; i < bd.nt; i++)
		if (bd.t[i].pid == pid)
			return &bd.t[i];
	if (bd.nt == MAXT)
		return NULL;
	t = &bd.t[bd.nt++];
	t->pid = pid;
	t->irq = irq;
	t->held_since = -1;
	return t;
}

static void push(struct stack *s, double ts, int slot, bool in_lock)
{
	if (s->n == DEPTH) {
		s->lost++;
		return;
	}
	s->f[s->n++] = (struct frame){ ts, slot, in_lock };
}

/* the innermost call a return ends; false if none is open (its entry came
 * before arm, or went to a lost frame) */
static bool pop(struct stack *s, struct frame *f)
{
	if (!s->n)
		return false;
	*f = s->f[--s->n];
	return true;
}

static void unbind_end(struct thread *t, double ts)
{
	struct frame f;

	if (!pop(&t->nvrm, &f))
		return;
	if (f.in_lock)
		t->unbind_in_lock += ts - f.ts;
	if (f.slot >= 0 && f.slot < MAXSLOTS) {
		bd.unbind[f.slot] += ts - f.ts;
		bd.nunbind[f.slot]++;
		bd.in_lock[f.slot] |= f.in_lock;
	}
}

bool breakdown_event(int pid, int irq_thread, double ts, const char *event)
{
	struct thread *t;
	struct frame f;
	size_t i;

	if (!strcmp(event, "lp_unconf")) {
		t = thread_of(pid, irq_thread);
		if (t)
			t->unconf = true;
		return false;
	}
	if (strncmp(event, "lp_bd_", 6))
		return false;
	for (i = 0; i < breakdown_nprobes && strcmp(event, breakdown_probes[i].name); i++)
		;
	/* waits only of pciehp IRQ threads: the rest of the system calls
	 * them too, and would fill the table */
	if (i == breakdown_nprobes || (i >= P_WAIT0 && irq_thread < 0))
		return true;
	t = thread_of(pid, irq_thread);
	if (!t)
		return true;
	switch (i) {
	case P_LOCK:
		push(&t->lock, ts, -1, false);
		break;
	case P_LOCK_RET:
		if (pop(&t->lock, &f))
			t->lock_wait += ts - f.ts;
		t->held_since = ts;
		break;
	case P_UNLOCK:
		if (t->held_since >= 0)
			t->lock_held += ts - t->held_since;
		t->held_since = -1;
		break;
	case P_NVRM_RET:
		unbind_end(t, ts);
		break;
	default: {
		int w = (int)(i - P_WAIT0) / 2;

		if ((i - P_WAIT0) % 2 == 0)
			push(&t->wait[w], ts, -1, false);
		else if (pop(&t->wait[w], &f)) {
			t->wait_s[w] += ts - f.ts;
			t->wait_n[w]++;
		}
	}
	}
	return true;
}

void breakdown_unbind(int pid, int irq_thread, double ts, int slot, bool ret)
{
	struct thread *t = thread_of(pid, irq_thread);

	if (!t)
		return;
	if (!ret)
		push(&t->nvrm, ts, slot, t->held_since >= 0);
	else if (!placed(P_NVRM_RET))	/* else lp_bd_nvrm_ret ends it */
		unbind_end(t, ts);
}

/* kprobe_profile: "NAME HITS MISSED" a line (6.1 prints the event name
 * alone, later kernels GROUP/NAME): missed summed over the probes that
 * feed the breakdown, by probe where not 0 */
void breakdown_read_profile(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512], name[128];
	long long h, m;

	bd.missed_by = json_object_new_object();
	while (f && fgets(line, sizeof(line), f)) {
		const char *e = name;
		bool ours = false;

		if (sscanf(line, "%127s %lld %lld", name, &h, &m) != 3)
			continue;
		if (!strncmp(name, "labprobe/", 9))
			e = name + 9;
		for (size_t i = 0; i < breakdown_nprobes; i++)
			ours |= !strcmp(e, breakdown_probes[i].name);
		for (size_t i = 0; i < sizeof(hotplug_probes) / sizeof(hotplug_probes[0]); i++)
			ours |= !strcmp(e, hotplug_probes[i]);
		if (!ours)
			continue;
		bd.missed = (bd.missed < 0 ? 0 : bd.missed) + m;
		if (m)
			json_object_object_add(bd.missed_by, e, json_object_new_int64(m));
	}
	if (f)
		fclose(f);
}

/* ---- collect: the report ---- */

static struct json_object *ms(double s)
{
	return ms3(s * 1e3);
}

static bool has_irq(const int *irqs, int n, int irq)
{
	for (int i = 0; i < n; i++)
		if (irqs[i] == irq)
			return true;
	return false;
}

/* the thread that tore slot s down: one that ran pciehp_unconfigure_device,
 * its own port's first, else the port's above it */
static struct thread *teardown_thread(const struct bd_slot *s)
{
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < bd.nt; i++)
			if (bd.t[i].irq >= 0 && bd.t[i].unconf &&
			    (pass ? has_irq(s->above, s->nabove, bd.t[i].irq) :
			     has_irq(s->irqs, s->nirqs, bd.t[i].irq)))
				return &bd.t[i];
	return NULL;
}

/* ms of CPU the IRQ thread of irq ran since arm, -1 if unknown */
static double thread_cpu_ms(struct json_object *arm, int irq)
{
	struct json_object *a = NULL, *v;

	if (arm)
		json_object_object_get_ex(arm, "threads", &a);
	for (size_t i = 0; a && i < json_object_array_length(a); i++) {
		struct json_object *t = json_object_array_get_idx(a, i);
		int pid;
		long long now, was;

		if (!json_object_object_get_ex(t, "irq", &v) || json_object_get_int(v) != irq)
			continue;
		json_object_object_get_ex(t, "pid", &v);
		pid = json_object_get_int(v);
		if (!json_object_object_get_ex(t, "start", &v) || task_start(pid) != json_object_get_int64(v))
			return -1;	/* the thread is gone (its port was removed) */
		if (!json_object_object_get_ex(t, "cpu_ns", &v) || !v)
			return -1;
		was = json_object_get_int64(v);
		now = task_cpu_ns(pid);
		/* "0 0 0": the kernel keeps no schedstat for tasks */
		if (now < 0 || now < was || (now == 0 && was == 0))
			return -1;
		return (double)(now - was) / 1e6;
	}
	return -1;
}

void breakdown_collect(struct json_object *arm, const struct bd_slot *s, int n, struct json_object **objs,
		       struct json_object *out)
{
	struct thread *tt[MAXSLOTS];
	int irq_of[MAXSLOTS], seen[MAXSLOTS], nseen = 0, nyanked = 0;
	double cpu[MAXSLOTS], total = 0;
	bool total_known = true;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);

	for (int i = 0; i < n && i < MAXSLOTS; i++) {
		objs[i] = NULL;
		if (!s[i].yanked)
			continue;
		tt[i] = teardown_thread(&s[i]);
		/* no teardown traced: its own port's thread, for its CPU time */
		irq_of[i] = tt[i] ? tt[i]->irq : s[i].nirqs ? s[i].irqs[0] : -1;
		cpu[i] = irq_of[i] >= 0 ? thread_cpu_ms(arm, irq_of[i]) : -1;
	}
	for (int i = 0; i < n && i < MAXSLOTS; i++) {
		struct json_object *o, *w;
		struct thread *t;
		int shared = 0, open = 0;
		bool lock = lock_traced(), nvrm = nvrm_traced();

		if (!s[i].yanked)
			continue;
		nyanked++;
		t = tt[i];
		for (int j = 0; j < n && t; j++)
			shared += s[j].yanked && tt[j] == t;
		o = json_object_new_object();
		if (t) {
			char name[32];

			snprintf(name, sizeof(name), "irq/%d-pciehp", t->irq);
			json_object_object_add(o, "thread", json_object_new_string(name));
			json_object_object_add(o, "pid", json_object_new_int(t->pid));
			open = t->lock.n + t->lock.lost + t->nvrm.n + t->nvrm.lost + (t->held_since >= 0);
			for (int k = 0; k < W_N; k++)
				open += t->wait[k].n + t->wait[k].lost;
		} else {
			json_object_object_add(o, "thread", NULL);
			json_object_object_add(o, "pid", NULL);
		}
		json_object_object_add(o, "thread_slots", t ? json_object_new_int(shared) : NULL);
		json_object_object_add(o, "lock_wait_ms", t && placed(P_LOCK) && placed(P_LOCK_RET) ?
				       ms(t->lock_wait) : NULL);
		json_object_object_add(o, "lock_held_ms", t && lock ? ms(t->lock_held) : NULL);
		json_object_object_add(o, "unbind_ms", nvrm && bd.nunbind[i] ? ms(bd.unbind[i]) : NULL);
		json_object_object_add(o, "unbind_in_lock", lock && nvrm && bd.nunbind[i] ?
				       json_object_new_boolean(bd.in_lock[i]) : NULL);
		json_object_object_add(o, "structural_ms", t && lock && nvrm ?
				       ms(t->lock_held > t->unbind_in_lock ? t->lock_held - t->unbind_in_lock : 0) :
				       NULL);
		w = json_object_new_object();
		for (int k = 0; k < W_N; k++) {
			struct json_object *c = NULL;

			if (t && wait_traced(k)) {
				c = json_object_new_object();
				json_object_object_add(c, "n", json_object_new_int(t->wait_n[k]));
				json_object_object_add(c, "ms", ms(t->wait_s[k]));
			}
			json_object_object_add(w, wait_fn[k], c);
		}
		json_object_object_add(o, "waits", w);
		json_object_object_add(o, "unfinished", t ? json_object_new_int(open) : NULL);
		json_object_object_add(o, "cpu_ms", cpu[i] >= 0 ? ms3(cpu[i]) : NULL);
		objs[i] = o;

		/* each thread once */
		{
			bool dup = false;

			for (int j = 0; j < nseen; j++)
				dup |= seen[j] == irq_of[i];
			if (dup)
				continue;
			if (nseen < MAXSLOTS)
				seen[nseen++] = irq_of[i];
			if (cpu[i] >= 0)
				total += cpu[i];
			else
				total_known = false;
		}
	}
	total_known &= nyanked > 0;
	json_object_object_add(out, "teardown_cpu_ms", total_known ? ms3(total) : NULL);
	json_object_object_add(out, "ncpus", ncpus > 0 ? json_object_new_int((int)ncpus) : NULL);
	json_object_object_add(out, "cpu_floor_ms", total_known && ncpus > 0 ?
			       ms3(total / (double)ncpus) : NULL);
	json_object_object_add(out, "kprobe_missed", bd.missed >= 0 ? json_object_new_int64(bd.missed) : NULL);
	if (bd.missed > 0)
		json_object_object_add(out, "kprobe_missed_by_probe", json_object_get(bd.missed_by));
	json_object_put(bd.missed_by);
	bd.missed_by = NULL;
	json_object_object_add(out, "breakdown_note", json_object_new_string(
		"slots[].breakdown: in the pciehp IRQ thread that tore each yanked slot down (shared by a "
		"JBOF's slots: thread_slots), inclusive kprobe-entry-to-kretprobe-return times summed per "
		"function (nested calls count in each) of its calls between arm and collect, in ms of "
		"CLOCK_MONOTONIC (trace_clock=mono, 1 us), cpu_ms its on-CPU time from /proc/<pid>/schedstat; "
		"null where a probe could not be placed or nothing was traced, and kprobe_missed counts "
		"probe hits the kernel lost"));
}
