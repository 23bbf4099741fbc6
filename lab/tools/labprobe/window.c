/* What the guest's CPUs did while a bulk yank was torn down: labprobe arm
 * and collect (arm.c, collect.c) add to collect's report
 *
 *   "cpu_window": {
 *     "ms"          the window: first pciehp hard interrupt to the last
 *                   yanked drive gone (last_gone_ms)
 *     "ncpus"       online CPUs at arm
 *     "busy_ms"     CPU time not spent idle in the window, summed over CPUs
 *     "idle_ms"     CPU time the idle task had
 *     "unknown_ms"  CPU time of a CPU that switched no task in the window
 *                   and after it, or of a task whose name labprobe had no
 *                   room to keep (what ran there is not known)
 *     "busy_pct"    busy_ms / (ms * ncpus): 100 means the vCPUs had no
 *                   time to spare, and the window could only shrink with
 *                   less work
 *     "by_task"     busy CPU time by task name, digits folded to N
 *                   ("irq/N-pciehp", "kworker/N:N", "fio"), the largest
 *                   twelve, the rest under "other"
 *     "switches"    context switches in the window
 *   }
 *
 * It comes from sched:sched_switch, enabled in labprobe's trace instance
 * by a trigger on the first pciehp hard interrupt (lp_isr), so the trace
 * holds switches from the window's start only. Interrupt and softirq time
 * counts to the task it interrupted. cpu_window is null, with a reason in
 * cpu_window_error, when the trigger could not be set, no drive was gone,
 * or the trace lost events. */
#include "labprobe.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXCPU 256
#define MAXNAMES 4096
#define TOP 12

struct sw {
	double ts;
	int cpu, prev, next;	/* prev, next: name index; or IDLE, UNKNOWN */
};

static struct {
	struct sw *ev;
	size_t n, cap;
	char *names[MAXNAMES];
	int nnames;
	bool lost, overflow;
} win;

static const char *const trigger = "enable_event:sched:sched_switch:1\n";
/* name indices below 0: the idle task, and a task whose name is not known
 * (not seen yet, or no room to keep its name) */
enum { IDLE = -1, UNKNOWN = -2 };

struct json_object *window_arm(const char *instance)
{
	struct json_object *o = json_object_new_object();
	char path[512];
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);

	snprintf(path, sizeof(path), "%s/events/labprobe/lp_isr/trigger", instance);
	json_object_object_add(o, "trigger", json_object_new_string(write_str(path, trigger) ? "could not be set" : "ok"));
	json_object_object_add(o, "ncpus", json_object_new_int((int)ncpus));
	return o;
}

void window_begin(void)
{
	free(win.ev);
	for (int i = 0; i < win.nnames; i++)
		free(win.names[i]);
	memset(&win, 0, sizeof(win));
}

/* "kworker/1:2" -> "kworker/N:N"; IDLE for the idle task (pid 0) */
static int name_index(const char *comm, int pid)
{
	char folded[64];
	size_t j = 0;

	if (pid == 0)
		return IDLE;
	for (size_t i = 0; comm[i] && j < sizeof(folded) - 1; i++) {
		if (isdigit((unsigned char)comm[i])) {
			if (j == 0 || folded[j - 1] != 'N')
				folded[j++] = 'N';
		} else {
			folded[j++] = comm[i];
		}
	}
	folded[j] = '\0';
	for (int i = 0; i < win.nnames; i++)
		if (!strcmp(win.names[i], folded))
			return i;
	if (win.nnames == MAXNAMES)
		return UNKNOWN;
	win.names[win.nnames] = strdup(folded);
	return win.names[win.nnames] ? win.nnames++ : UNKNOWN;
}

/* "prev_comm=fio prev_pid=812 ... ==> next_comm=swapper/1 next_pid=0 ...";
 * who: "prev" or "next" */
static bool field(const char *args, const char *who, char *comm, size_t len, int *pid)
{
	char key[16], pidkey[16], *end;
	const char *a, *p;
	long v;

	snprintf(key, sizeof(key), "%s_comm=", who);
	snprintf(pidkey, sizeof(pidkey), " %s_pid=", who);
	a = strstr(args, key);
	if (!a)
		return false;
	a += strlen(key);
	p = strstr(a, pidkey);
	if (!p || (size_t)(p - a) >= len)
		return false;
	memcpy(comm, a, p - a);
	comm[p - a] = '\0';
	if (!scan_long(p + strlen(pidkey), &end, 0, INT_MAX, &v))
		return false;
	*pid = (int)v;
	return true;
}

void window_lost(void)
{
	win.lost = true;
}

bool window_event(int cpu, double ts, const char *event, const char *args)
{
	char prev[64], next[64];
	int ppid, npid;
	struct sw *e;

	if (strcmp(event, "sched_switch"))
		return false;
	if (cpu < 0 || cpu >= MAXCPU || !field(args, "prev", prev, sizeof(prev), &ppid) ||
	    !field(args, "next", next, sizeof(next), &npid))
		return true;
	if (win.n == win.cap) {
		size_t cap = win.cap ? 2 * win.cap : 4096;
		struct sw *ev = cap <= (1u << 22) ? realloc(win.ev, cap * sizeof(*ev)) : NULL;

		if (!ev) {
			win.overflow = true;
			return true;
		}
		win.ev = ev;
		win.cap = cap;
	}
	e = &win.ev[win.n++];
	*e = (struct sw){ ts, cpu, name_index(prev, ppid), name_index(next, npid) };
	return true;
}

static int cmp_ms(const void *a, const void *b)
{
	double x = ((const double *)a)[0], y = ((const double *)b)[0];

	return x < y ? 1 : x > y ? -1 : 0;
}

/* [t0, t1]: the window in trace seconds; armed: arm's "cpu_window" */
struct json_object *window_collect(struct json_object *armed, double t0, double t1, const char **why)
{
	struct json_object *o, *by, *v;
	double *per = NULL, idle = 0, unknown = 0, busy = 0, (*top)[2] = NULL;
	int ncpus = 0, cur[MAXCPU], switches = 0;
	double since[MAXCPU];
	bool done[MAXCPU];

	*why = NULL;
	if (!armed || !json_object_object_get_ex(armed, "trigger", &v) || strcmp(json_object_get_string(v), "ok"))
		*why = "the sched_switch trigger was not set at arm";
	else if (json_object_object_get_ex(armed, "ncpus", &v))
		ncpus = json_object_get_int(v);
	if (!*why && (ncpus < 1 || ncpus > MAXCPU))
		*why = "no CPU count at arm";
	if (!*why && (t0 < 0 || t1 < t0))
		*why = "no window: no pciehp interrupt or no drive gone";
	if (!*why && win.lost)
		*why = "the trace lost events";
	if (!*why && win.overflow)
		*why = "more context switches than labprobe keeps";
	if (*why)
		return NULL;

	per = calloc(win.nnames + 1, sizeof(*per));
	if (!per) {
		*why = "out of memory";
		return NULL;
	}
	for (int c = 0; c < ncpus; c++) {
		cur[c] = UNKNOWN;	/* until its first switch */
		since[c] = t0;
		done[c] = false;
	}
	/* the trace is in time order: each CPU's switches in turn */
	for (size_t i = 0; i < win.n; i++) {
		const struct sw *e = &win.ev[i];
		int c = e->cpu, who;
		double end;

		if (c >= ncpus || done[c])
			continue;
		if (e->ts <= t0) {
			cur[c] = e->next;
			continue;
		}
		/* the task that ran until this switch: its prev */
		who = e->prev;
		end = e->ts < t1 ? e->ts : t1;
		if (who == IDLE)
			idle += end - since[c];
		else if (who == UNKNOWN)
			unknown += end - since[c];
		else
			per[who] += end - since[c];
		if (e->ts >= t1) {
			done[c] = true;
			continue;
		}
		switches++;
		cur[c] = e->next;
		since[c] = e->ts;
	}
	for (int c = 0; c < ncpus; c++) {
		if (done[c])
			continue;
		/* no switch after the window on this CPU: its last task ran on */
		if (cur[c] == UNKNOWN)
			unknown += t1 - since[c];
		else if (cur[c] == IDLE)
			idle += t1 - since[c];
		else
			per[cur[c]] += t1 - since[c];
	}

	o = json_object_new_object();
	by = json_object_new_object();
	top = calloc(win.nnames + 1, sizeof(*top));
	if (top) {
		double other = 0;

		for (int i = 0; i < win.nnames; i++) {
			busy += per[i];
			top[i][0] = per[i];
			top[i][1] = i;
		}
		qsort(top, win.nnames, sizeof(*top), cmp_ms);
		for (int i = 0; i < win.nnames; i++) {
			if (top[i][0] <= 0)
				break;
			if (i < TOP)
				json_object_object_add(by, win.names[(int)top[i][1]],
						       ms3(top[i][0] * 1e3));
			else
				other += top[i][0];
		}
		if (other > 0)
			json_object_object_add(by, "other", ms3(other * 1e3));
	}
	json_object_object_add(o, "ms", ms3((t1 - t0) * 1e3));
	json_object_object_add(o, "ncpus", json_object_new_int(ncpus));
	json_object_object_add(o, "busy_ms", ms3(busy * 1e3));
	json_object_object_add(o, "idle_ms", ms3(idle * 1e3));
	json_object_object_add(o, "unknown_ms", ms3(unknown * 1e3));
	json_object_object_add(o, "busy_pct", t1 > t0 ? ms3(100.0 * busy / ((t1 - t0) * ncpus)) : NULL);
	json_object_object_add(o, "by_task", by);
	json_object_object_add(o, "switches", json_object_new_int(switches));
	free(per);
	free(top);
	return o;
}
