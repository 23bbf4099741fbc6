/* Kernel log gate: the lines that fail a scenario, with their context.
 * Reads /dev/kmsg from the oldest record the ring still holds. */
#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The lines that fail a scenario, each with its kind; the first pattern
 * that matches a record gives its kind, so the specific reports come
 * before the catch-alls ("^BUG:", "^WARNING:") that would take them too.
 * A needle starting with '^' must open the message: the kernel prints these
 * reports with no prefix, or with the fixed pr_fmt() prefix written in the
 * needle ("rcu: ", "watchdog: ", "sysfs: "), so the same words in a
 * device's message, a user space line in the log ("traps: fio[12] general
 * protection fault", "systemd[1]: ...") or a boot notice ("RETBleed:
 * WARNING: ...") do not count. A '*' in a needle stands for any run of
 * characters (a task name, a number); a '%' for the name of the task that
 * printed the line (current->comm: 1 to 15 characters, none a space), so
 * that "labprobe: fio: page allocation failure" or a device's "nvme nvme0:
 * ..." is no task's line. The strings are the kernel's own (Linux 6.1): the
 * file each is printed from is named above it.
 *
 * Flags: JOINS, a line of the report of the scan's last finding when that
 * finding is of the same kind (the OOM killer's kill line after its
 * "invoked oom-killer" header, hundreds of records of memory and task
 * dump later): no finding of its own, its line (with the lines around it)
 * goes into that finding's context; with no such finding it is a finding
 * of its own.
 * NO_DUMP: a line whose report prints no stack dump, so a "Call Trace:"
 * after it is not its (below).
 *
 * A stack dump ("Call Trace:", arch/x86/kernel/dumpstack.c) is a finding of
 * kind "unknown-trace" unless it belongs to a report: one that matched a
 * pattern (other than NO_DUMP), or a dump asked for through sysrq
 * (dump_owners[]). It belongs to the last such report when it comes at
 * most TRACE_REACH records and TRACE_SECONDS after that report's line or
 * after the report's previous stack dump (an RCU stall's or sysrq's
 * several dumps), whether or not an earlier scan read the report. The
 * finding names the dump's header: the record before the lines
 * dump_stack() and show_regs() print ahead of "Call Trace:" (dump_preamble[]),
 * e.g. the message of a driver that called dump_stack(). */
#define JOINS	1
#define NO_DUMP	2
/* a row without flags leaves them 0 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct {
	const char *needle;
	const char *kind;
	unsigned int flags;
} patterns[] = {
	/* lockdep reports (kernel/locking/lockdep.c) */
	{ "^WARNING: possible circular locking dependency detected", "lockdep" },
	{ "^WARNING: possible recursive locking detected", "lockdep" },
	{ "^WARNING: inconsistent lock state", "lockdep" },
	{ "^WARNING: possible irq lock inversion dependency detected", "lockdep" },
	{ "^WARNING: *-safe -> *-unsafe lock order detected", "lockdep" },
	{ "^WARNING: bad unlock balance detected!", "lockdep" },
	{ "^WARNING: held lock freed!", "lockdep" },
	{ "^WARNING: * still has locks held!", "lockdep" },
	{ "^WARNING: lock held when returning to user space!", "lockdep" },
	{ "^WARNING: suspicious RCU usage", "lockdep" },
	{ "^WARNING: Nested lock was not taken", "lockdep" },
	{ "^WARNING: chain_key collision", "lockdep" },
	{ "^WARNING: bad contention detected!", "lockdep" },
	{ "^[ BUG: Invalid wait context ]", "lockdep" },
	/* a lock used before it was initialised: lockdep turns itself off */
	{ "^INFO: trying to register non-static key.", "lockdep" },
	/* sleeping in atomic context (kernel/sched/core.c) */
	{ "^BUG: sleeping function called from invalid context at ", "sleep-in-atomic" },
	{ "^BUG: scheduling while atomic: ", "sleep-in-atomic" },
	/* sanitizers (mm/kasan/report.c, lib/ubsan.c) */
	{ "^BUG: KASAN: ", "kasan" },
	{ "^UBSAN: ", "ubsan" },
	/* hangs and stalls (kernel/hung_task.c, kernel/rcu/tree_stall.h,
	 * tree_exp.h, tasks.h, kernel/watchdog.c, watchdog_hld.c) */
	{ "^INFO: task * blocked for more than * seconds.", "hung-task" },
	{ "^rcu: INFO: * detected stalls on CPUs/tasks:", "rcu-stall" },
	{ "^rcu: INFO: * self-detected stall on CPU", "rcu-stall" },
	{ "^rcu: INFO: * detected expedited stalls on CPUs/tasks: {", "rcu-stall" },
	{ "^INFO: rcu_tasks* detected stalls on tasks:", "rcu-stall" },
	{ "^watchdog: BUG: soft lockup - CPU#", "lockup" },
	{ "^NMI watchdog: Watchdog detected hard LOCKUP on cpu ", "lockup" },
	/* an interrupt no handler took, disabled (kernel/irq/spurious.c) */
	{ "^irq *: nobody cared", "spurious-irq" },
	{ "^irq event *: bogus return value ", "spurious-irq" },
	{ "^Disabling IRQ #", "spurious-irq" },
	/* corruption caught (lib/list_debug.c, lib/refcount.c); a WARNING or
	 * kernel BUG line follows, a finding of its own */
	{ "^list_add corruption", "list-corruption" },
	{ "^list_del corruption", "list-corruption" },
	{ "^refcount_t: ", "refcount" },
	/* a sysfs file or directory created twice (fs/sysfs/dir.c
	 * sysfs_warn_dup: pr_warn, then dump_stack(), no WARNING line; for a
	 * directory lib/kobject.c's "kobject_add_internal failed for ... with
	 * -EEXIST" follows, no finding of its own; unchanged in 6.12) */
	{ "^sysfs: cannot create duplicate filename '", "sysfs-dup" },
	/* the OOM killer (mm/oom_kill.c): dump_header's line opens the report
	 * (its dump_stack, Mem-Info, the task list, "oom-kill:constraint=..."),
	 * __oom_kill_process's kill line (one per task of a memory.oom.group)
	 * or the "no killable processes" line ends it: one finding an event.
	 * dump_header is rate-limited: a kill line without it is the finding.
	 * The lines are unchanged in 6.12. */
	{ "^% invoked oom-killer: gfp_mask=0x", "oom" },
	{ "^Out of memory: Killed process ", "oom", JOINS },
	{ "^Out of memory (oom_kill_allocating_task): Killed process ", "oom", JOINS },
	{ "^Memory cgroup out of memory: Killed process ", "oom", JOINS },
	{ "^Out of memory and no killable processes...", "oom", JOINS },
	/* an allocation that failed without __GFP_NOWARN (mm/page_alloc.c
	 * warn_alloc, from __alloc_pages_slowpath and mm/vmalloc.c: "<comm>:
	 * <what>, mode:0x...(<gfp flags>), nodemask=...", then dump_stack() and
	 * the memory state; unchanged in 6.12) */
	{ "^%: page allocation failure: order:*, mode:0x", "alloc-failure" },
	{ "^%: vmalloc error: size *, mode:0x", "alloc-failure" },
	/* BUG() and the other "BUG: ..." reports (lib/bug.c, arch/x86/mm/fault.c) */
	{ "^kernel BUG at ", "bug" },
	{ "^Kernel BUG at ", "bug" },
	{ "^BUG:", "bug" },
	/* WARN() (kernel/panic.c __warn: "WARNING: CPU: 0 PID: 1 at ...") */
	{ "^WARNING:", "warning" },
	/* oopses: the die() header, "<what>: <error code> [#n] ..."
	 * (arch/x86/mm/fault.c, arch/x86/kernel/traps.c) */
	{ "^Oops: ", "oops" },
	{ "^general protection fault", "oops" },
	{ "^segment-related general protection fault", "oops" },
	{ "^invalid opcode: ", "oops" },
	{ "^divide error: ", "oops" },
	{ "^Kernel panic - not syncing: ", "panic" },
	/* pciehp states that are wrong whenever the lab sees them */
	{ "Already disabled", "pciehp-state", NO_DUMP },
	{ "Already enabled", "pciehp-state", NO_DUMP },
	{ "cannot hot-add", "pciehp-state", NO_DUMP },
	{ "Timeout on hotplug command", "pciehp-state", NO_DUMP },
};
#pragma GCC diagnostic pop

/* The records that own the stack dumps after them without being findings:
 * the dumps a user asked for through sysrq (drivers/tty/sysrq.c, pr_fmt
 * "sysrq: ": "Show Blocked State", "Show State", "Show backtrace of all
 * active CPUs", "Show Regs"; steps/vm-restart.yml asks for the first). */
static const char *const dump_owners[] = { "sysrq: ", NULL };

/* A stack dump's first line: x86's (arch/x86/kernel/dumpstack.c
 * show_trace_log_lvl), and arm64's spelling */
static const char *const trace_starts[] = { "Call Trace:", "Call trace:", NULL };

/* The lines dump_stack() and show_regs() print between the report's header
 * and "Call Trace:" (lib/dump_stack.c dump_stack_print_info: "CPU: ..."
 * ("CPU: 0 UID: 0 PID: ..." in 6.12), later kernels' "Tainted: [W]=WARN",
 * "Hardware name:", kernel/workqueue.c "Workqueue:", kernel/stop_machine.c
 * "Stopper:", 6.12's kernel/sched/ext.c "Sched_ext:"; the registers of
 * arch/x86/kernel/dumpstack.c show_ip/show_opcodes and process_64.c
 * __show_regs; kernel/module's "Modules linked in:") */
static const char *const dump_preamble[] = {
	"CPU: ", "Tainted: ", "Hardware name: ", "Workqueue: ", "Stopper: ", "Sched_ext: ",
	"Modules linked in:", "RIP: ", "Code: ", "RSP: ", "RAX: ", "RDX: ", "RBP: ", "R10: ",
	"R13: ", "FS: ", "CS: ", "CR2: ", "DR0: ", "DR3: ", "PKRU: ", NULL,
};

/* How far after its report's line (or its previous stack dump) a report's
 * stack dump may come, in records and in seconds: lockdep's is the
 * farthest, after the stacks of its dependency chain ("stack backtrace:";
 * about 50 records in reference-results/stock-debug1, a chain of two
 * locks); a report is printed in one go, in well under a second (a slow
 * console may stretch that), so a dump minutes later on a quiet log is
 * another's. */
#define TRACE_REACH 200
#define TRACE_SECONDS 10.0

/* Whether s opens with pattern p ('*': any run of characters, '%': a
 * task's name, 1 to 15 characters (TASK_COMM_LEN - 1) none a space; each
 * the shortest that lets the rest match). */
static bool opens_with(const char *s, const char *p)
{
	for (; *p && *p != '*' && *p != '%'; p++, s++)
		if (*s != *p)
			return false;
	if (!*p)
		return true;
	if (*p == '%') {
		for (int len = 1; len <= 15 && s[len - 1] && s[len - 1] != ' '; len++)
			if (opens_with(s + len, p + 1))
				return true;
		return false;
	}
	for (p++;; s++) {
		if (opens_with(s, p))
			return true;
		if (!*s)
			return false;
	}
}

static bool pattern_matches(const char *msg, const char *needle)
{
	if (needle[0] == '^')
		return opens_with(msg, needle + 1);
	for (; *msg; msg++)
		if (opens_with(msg, needle))
			return true;
	return false;
}

struct rec {
	unsigned long long seq;
	double ts;
	char *msg;
};

/* The kernel log. LABPROBE_KMSG names another file of records in its
 * format: a test hook, to run the reader on a host without touching its
 * log. */
static const char *kmsg_path(void)
{
	const char *p = getenv("LABPROBE_KMSG");

	return p && p[0] ? p : "/dev/kmsg";
}

/* How reading the log went in this run, for kmsg_report(): whether it was
 * read at all, the first error, and the most records one pass over the
 * log lost to ring overruns. */
static struct {
	bool read;
	char error[320];
	unsigned long long overrun;
} kmsg_state;

const char *kmsg_error(void)
{
	return kmsg_state.error[0] ? kmsg_state.error : NULL;
}

bool kmsg_report(struct json_object *out)
{
	if (!kmsg_state.read)
		return false;
	json_object_object_add(out, "kmsg_overrun", json_object_new_uint64(kmsg_state.overrun));
	if (kmsg_error())
		json_object_object_add(out, "error", json_object_new_string(kmsg_error()));
	return kmsg_error() != NULL;
}

/* Parses "pri,seq,ts_usec,flags;message"; returns false for junk. */
static bool parse_record(const char *line, struct rec *r)
{
	const char *semi = strchr(line, ';');
	unsigned int pri;
	unsigned long long seq, usec;

	if (!semi || sscanf(line, "%u,%llu,%llu", &pri, &seq, &usec) != 3)
		return false;
	r->seq = seq;
	r->ts = (double)usec / 1e6;
	r->msg = strdup(semi + 1);
	if (!r->msg)
		abort();
	return true;
}

struct reader {
	struct rec *recs;
	size_t n, cap;
	bool epipe;			/* an overrun not yet counted */
	unsigned long long lost;	/* records lost to overruns */
};

static void add_line(struct reader *rd, const char *line)
{
	struct rec r;
	unsigned long long gap = 0;

	/* " KEY=value" lines continue the record before them */
	if (line[0] == ' ' || !parse_record(line, &r))
		return;
	/* after EPIPE the reader goes on at the oldest record left: the
	 * sequence numbers skipped are the records lost (at least one) */
	if (rd->n && r.seq > rd->recs[rd->n - 1].seq + 1)
		gap = r.seq - rd->recs[rd->n - 1].seq - 1;
	if (rd->epipe && !gap)
		gap = 1;
	rd->lost += gap;
	rd->epipe = false;
	if (rd->n == rd->cap) {
		rd->cap = rd->cap ? rd->cap * 2 : 1024;
		rd->recs = realloc(rd->recs, rd->cap * sizeof(*rd->recs));
		if (!rd->recs)
			abort();
	}
	rd->recs[rd->n++] = r;
}

static void free_recs(struct rec *recs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(recs[i].msg);
	free(recs);
}

/* Every record the ring holds, oldest first; -1 (and kmsg_error()) when
 * the log cannot be opened or read. /dev/kmsg returns one record a read
 * (its line and continuation lines; EAGAIN at the end, EPIPE when records
 * were overwritten under the reader); a file of records (the test hook)
 * returns many a read, the last one maybe cut, and 0 at its end. */
static ssize_t read_all(struct rec **out)
{
	const char *path = kmsg_path();
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	struct reader rd = { 0 };
	char buf[16384], *line, *nl;
	size_t have = 0;
	bool skip = false;	/* in a line longer than buf: drop it */

	kmsg_state.read = true;
	*out = NULL;
	if (fd < 0) {
		if (!kmsg_error())
			snprintf(kmsg_state.error, sizeof(kmsg_state.error), "cannot open %s: %s",
				 path, strerror(errno));
		return -1;
	}
	for (;;) {
		ssize_t len = read(fd, buf + have, sizeof(buf) - 1 - have);

		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0 && errno == EPIPE) {	/* overwritten while reading: go on */
			rd.epipe = true;
			continue;
		}
		if (len < 0 && errno == EAGAIN)
			break;
		if (len < 0) {
			if (!kmsg_error())
				snprintf(kmsg_state.error, sizeof(kmsg_state.error), "cannot read %s: %s",
					 path, strerror(errno));
			close(fd);
			free_recs(rd.recs, rd.n);
			return -1;
		}
		if (len == 0)
			break;
		have += (size_t)len;
		buf[have] = '\0';
		for (line = buf; (nl = strchr(line, '\n')); line = nl + 1) {
			*nl = '\0';
			if (!skip)
				add_line(&rd, line);
			skip = false;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) {
			skip = true;
			have = 0;
		}
	}
	if (have && !skip) {
		buf[have] = '\0';
		add_line(&rd, buf);
	}
	if (rd.epipe)
		rd.lost++;
	if (rd.lost > kmsg_state.overrun)
		kmsg_state.overrun = rd.lost;
	close(fd);
	*out = rd.recs;
	return (ssize_t)rd.n;
}

unsigned long long kmsg_last_seq(void)
{
	struct rec *recs;
	ssize_t n = read_all(&recs);
	unsigned long long seq = n > 0 ? recs[n - 1].seq : 0;

	free_recs(recs, n > 0 ? (size_t)n : 0);
	return seq;
}

struct json_object *kmsg_last_seq_json(void)
{
	unsigned long long seq = kmsg_last_seq();

	/* not 0: that would pass for a sequence number the log reached */
	return kmsg_error() ? NULL : json_object_new_uint64(seq);
}

struct json_object *kmsg_lines(unsigned long long since, const char *needle, int max)
{
	struct json_object *arr = json_object_new_array();
	struct rec *recs;
	ssize_t got = read_all(&recs);
	size_t n = got > 0 ? (size_t)got : 0, first = n;
	int taken = 0;

	if (got < 0) {	/* not an empty log: say why there is none */
		json_object_array_add(arr, json_object_new_string(kmsg_error()));
		return arr;
	}

	/* walk back to the first of the last `max` matching records */
	for (size_t i = n; i-- > 0 && taken < max;) {
		if (recs[i].seq <= since)
			break;
		if (!needle || strstr(recs[i].msg, needle)) {
			first = i;
			taken++;
		}
	}
	for (size_t i = first; i < n; i++) {
		char line[1100];

		if (needle && !strstr(recs[i].msg, needle))
			continue;
		snprintf(line, sizeof(line), "[%12.6f] %.1000s", recs[i].ts, recs[i].msg);
		json_object_array_add(arr, json_object_new_string(line));
	}
	free_recs(recs, n);
	return arr;
}

/* how many of the sequence numbers a..b (inclusive) the ranges cover */
static unsigned long long covered(unsigned long long a, unsigned long long b,
				  const unsigned long long (*ranges)[2], int nranges)
{
	unsigned long long n = 0;

	for (int r = 0; r < nranges; r++) {
		unsigned long long lo = ranges[r][0] + 1 > a ? ranges[r][0] + 1 : a;
		unsigned long long hi = ranges[r][1] < b ? ranges[r][1] : b;

		if (lo <= hi)
			n += hi - lo + 1;
	}
	return n;
}

static bool in_ranges(unsigned long long seq, const unsigned long long (*ranges)[2], int nranges)
{
	for (int r = 0; r < nranges; r++)
		if (seq > ranges[r][0] && seq <= ranges[r][1])
			return true;
	return false;
}

/* The first pattern of the table that matches msg: its index, or -1 */
static int pattern_of(const char *msg)
{
	for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++)
		if (pattern_matches(msg, patterns[p].needle))
			return (int)p;
	return -1;
}

static bool starts_with_any(const char *msg, const char *const *prefixes)
{
	for (; *prefixes; prefixes++)
		if (!strncmp(msg, *prefixes, strlen(*prefixes)))
			return true;
	return false;
}

static bool is_any(const char *msg, const char *const *lines)
{
	for (; *lines; lines++)
		if (!strcmp(msg, *lines))
			return true;
	return false;
}

/* The header of the stack dump whose "Call Trace:" is recs[t]: the record
 * before the dump's preamble lines and blank lines (at most 24 of them),
 * or the "Call Trace:" itself when there is none. */
static size_t dump_header(const struct rec *recs, size_t t)
{
	for (size_t h = t; h-- > 0 && t - h <= 24;)
		if (recs[h].msg[strspn(recs[h].msg, " ")] && !starts_with_any(recs[h].msg, dump_preamble))
			return h;
	return t;
}

/* Adds records from..to (those the log has) to a finding's context; *end:
 * the last one added */
static void add_context(struct json_object *ctx, const struct rec *recs, size_t n, size_t from, size_t to,
			size_t *end)
{
	for (size_t j = from; j < n && j <= to; j++) {
		char line[1100];

		snprintf(line, sizeof(line), "[%12.6f] %.1000s", recs[j].ts, recs[j].msg);
		json_object_array_add(ctx, json_object_new_string(line));
		*end = j;
	}
}

/* A finding of kind on recs[at] (its line and time) into list, its context
 * the records from `context` before at to `context` after last */
static struct json_object *add_finding(struct json_object *list, const struct rec *recs, size_t n,
				       const char *kind, size_t at, size_t last, int context, size_t *end)
{
	struct json_object *o = json_object_new_object(), *ctx = json_object_new_array();

	json_object_object_add(o, "kind", json_object_new_string(kind));
	json_object_object_add(o, "time", json_object_new_double(recs[at].ts));
	json_object_object_add(o, "line", json_object_new_string(recs[at].msg));
	add_context(ctx, recs, n, at > (size_t)context ? at - context : 0, last + context, end);
	json_object_object_add(o, "context", ctx);
	json_object_array_add(list, o);
	return o;
}

/* The findings of the records after since_seq; *checked: how many of
 * them are in none of the ranges ((from, to]: what earlier scans
 * covered), *last: the last record's sequence number. */
static struct json_object *scan(unsigned long long since_seq, const unsigned long long (*ranges)[2], int nranges,
				int context, unsigned long long *checked, unsigned long long *last)
{
	struct json_object *list = json_object_new_array();
	struct rec *recs;
	ssize_t got = read_all(&recs);
	size_t n = got > 0 ? (size_t)got : 0;

	*checked = 0;
	*last = since_seq;
	if (got < 0) {	/* a log that cannot be read is no clean log */
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "kind", json_object_new_string("kmsg-error"));
		json_object_object_add(o, "line", json_object_new_string(kmsg_error()));
		json_object_object_add(o, "context", json_object_new_array());
		json_object_array_add(list, o);
		return list;
	}
	if (n)
		*last = recs[n - 1].seq;

	/* Records of the window the ring lost before they were read (an
	 * overrun: the oldest record left is past since_seq + 1, or the
	 * sequence jumps inside the window) leave the scan incomplete: that is
	 * a finding of its own, never a clean result. Lost records an earlier
	 * scan covered were that scan's finding. */
	unsigned long long lost = 0, prev = since_seq;
	for (size_t i = 0; i < n; i++) {
		if (since_seq && recs[i].seq <= since_seq)
			continue;
		if ((since_seq || prev) && recs[i].seq > prev + 1)
			lost += recs[i].seq - prev - 1 - covered(prev + 1, recs[i].seq - 1, ranges, nranges);
		prev = recs[i].seq;
	}
	if (lost) {
		struct json_object *o = json_object_new_object();
		char line[200];

		snprintf(line, sizeof(line), "kernel log: %llu record(s) after seq %llu were lost to a ring "
			 "overrun before they were read: this scan is incomplete", lost, since_seq);
		json_object_object_add(o, "kind", json_object_new_string("kmsg-gap"));
		json_object_object_add(o, "line", json_object_new_string(line));
		json_object_object_add(o, "context", json_object_new_array());
		json_object_array_add(list, o);
	}

	/* the record of the last report that owns the stack dumps after it
	 * (or of its last dump), and this scan's last finding */
	size_t owner = 0, found_end = 0;
	bool owned = false;
	struct json_object *found = NULL;
	const char *found_kind = NULL;

	for (size_t i = 0; i < n; i++) {
		/* the records before the scan (or an earlier scan's) are read
		 * too: a report they hold owns its stack dump in this scan */
		bool in_scan = !(recs[i].seq <= since_seq && since_seq);
		int p = pattern_of(recs[i].msg);

		/* ranges an earlier scan covered: counted apart, still scanned */
		if (in_scan && !in_ranges(recs[i].seq, ranges, nranges))
			(*checked)++;
		if (p >= 0) {
			if (!(patterns[p].flags & (JOINS | NO_DUMP))) {
				owner = i;
				owned = true;
			}
			if (!in_scan)
				continue;
			if ((patterns[p].flags & JOINS) && found && !strcmp(found_kind, patterns[p].kind)) {
				struct json_object *ctx;

				json_object_object_get_ex(found, "context", &ctx);
				add_context(ctx, recs, n, i > (size_t)context && i - context > found_end ? i - context
					    : found_end + 1, i + context, &found_end);
				continue;
			}
			found = add_finding(list, recs, n, patterns[p].kind, i, i, context, &found_end);
			found_kind = patterns[p].kind;
		} else if (starts_with_any(recs[i].msg, dump_owners)) {
			owner = i;
			owned = true;
		} else if (is_any(recs[i].msg, trace_starts)) {
			if (owned && i - owner <= TRACE_REACH && recs[i].ts - recs[owner].ts <= TRACE_SECONDS) {
				owner = i;
				continue;
			}
			if (!in_scan)
				continue;
			found = add_finding(list, recs, n, "unknown-trace", dump_header(recs, i), i, context, &found_end);
			found_kind = "unknown-trace";
		}
	}
	free_recs(recs, n);
	return list;
}

struct json_object *findings_scan(unsigned long long since_seq, int context)
{
	unsigned long long checked, last;
	struct json_object *list;

	/* a canary due at this scan goes into the log first (logwindow.c) */
	log_window_before_scan();
	list = scan(since_seq, NULL, 0, context, &checked, &last);
	if (!kmsg_error())
		log_window_scanned(since_seq, last);
	return list;
}

struct json_object *findings_scan_window(unsigned long long since_seq, const unsigned long long (*ranges)[2],
					 int nranges, int context, struct json_object *out)
{
	unsigned long long checked, last;
	struct json_object *list = scan(since_seq, ranges, nranges, context, &checked, &last);

	json_object_object_add(out, "unscanned_records", json_object_new_uint64(checked));
	json_object_object_add(out, "last_seq", json_object_new_uint64(last));
	return list;
}

int cmd_findings(int argc, char **argv, struct json_object *out)
{
	enum { OPT_SINCE_SEQ = OPT_FIRST, OPT_CONTEXT };
	static const struct option opts[] = {
		{ "since-seq", required_argument, NULL, OPT_SINCE_SEQ },
		{ "context", required_argument, NULL, OPT_CONTEXT },
		{ NULL, 0, NULL, 0 },
	};
	long since = 0;
	int context = 8, opt;
	struct json_object *f;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_SINCE_SEQ:
			if (parse_long_opt("--since-seq", optarg, 0, LONG_MAX, &since))
				return 2;
			break;
		case OPT_CONTEXT:
			if (parse_int_opt("--context", optarg, 0, 1000, &context))
				return 2;
			break;
		default:
			return 2;
		}
	}
	f = findings_scan((unsigned long long)since, context);
	json_object_object_add(out, "kmsg_last_seq", kmsg_last_seq_json());
	json_object_object_add(out, "findings", f);
	return json_object_array_length(f) ? 1 : 0;
}

/* The kernel log's findings after since (none looked for without it) and
 * the check that there are none: the look of view and bars */
struct json_object *findings_check(struct checks *c, bool since_given, long since)
{
	struct json_object *findings = since_given ? findings_scan((unsigned long long)since, 8)
						   : json_object_new_array();

	if (since_given)
		check(c, json_object_array_length(findings) == 0, "kernel-log-clean",
		      "%zu finding(s) after kmsg seq %ld", json_object_array_length(findings), since);
	return findings;
}
