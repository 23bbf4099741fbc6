/* A bus rescan loop beside a scenario, and the kernel's lock statistics.
 *
 *   labprobe rescan-loop start [--interval-ms N] [--keep-lock-stat]
 *   labprobe rescan-loop stop [--timeout S] [--class NAME]...
 *   labprobe lockstat [--reset] [CLASS...]
 *
 * start leaves a detached process (its own session, stdio on /dev/null)
 * that writes 1 to /sys/bus/pci/rescan every N ms (default 200; a rescan
 * that takes longer is followed by the next one at once, none are caught
 * up) and keeps its counts in a small state file: rescans done, write
 * errors (and the last one), the longest and the total time a write took
 * (a rescan waits for pci_rescan_remove_lock, so these are the lock's
 * waits as user space sees them) and, while a write is in the kernel,
 * since when. start also zeroes /proc/lock_stat when the kernel has it
 * (CONFIG_LOCK_STAT; not with --keep-lock-stat), notes the kernel log's
 * sequence number, and first stops a loop that is still running. It
 * prints the loop's pid and its first state.
 *
 * stop ends the loop (SIGTERM; the write in the kernel, if any, finishes
 * first: up to --timeout S, default 120) and prints rescans, errors,
 * ran_ms and running_at_stop (whether the loop was still running when
 * stop came: false if it had died, or the guest rebooted, which it says);
 * the /proc/lock_stat rows of pci_rescan_remove_lock (or of each --class)
 * when the kernel has lock statistics; and the kernel log findings since
 * start. A loop that could not be stopped (a rescan blocked in the kernel
 * past the timeout) is reported as running_at_stop with stuck and how long
 * its rescan has waited. stop exits 0 only when it stopped a loop that had
 * run the whole time without a write error and the log has no finding.
 *
 * lockstat prints the /proc/lock_stat rows of the classes named
 * (default pci_rescan_remove_lock), then zeroes the statistics with
 * --reset. Times are microseconds, as /proc/lock_stat prints them.
 *
 * Files: the running loop's state in /run/labprobe-rescan.json (tmpfs: gone
 * with a reboot), and /var/lib/labprobe/rescan-loop.json, written at start
 * and removed by stop, which tells a reboot since start from no loop at
 * all. Test hooks: LABPROBE_RESCAN=FILE is written instead of
 * /sys/bus/pci/rescan, LABPROBE_RESCAN_STATE=DIR holds both state files
 * (live.json, start.json), LABPROBE_LOCK_STAT=FILE is read (and zeroed)
 * instead of /proc/lock_stat, LABPROBE_BOOT_ID=FILE is read instead of
 * /proc/sys/kernel/random/boot_id. */
#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CLASS "pci_rescan_remove_lock"
#define MAX_CLASSES 16
#define CLASS_MAX 64	/* lock_stat prints at most 38 characters of a name */

static void state_paths(char *live, char *start, size_t len)
{
	const char *dir = getenv("LABPROBE_RESCAN_STATE");

	if (dir && dir[0]) {
		snprintf(live, len, "%s/live.json", dir);
		snprintf(start, len, "%s/start.json", dir);
	} else {
		snprintf(live, len, "/run/labprobe-rescan.json");
		snprintf(start, len, "/var/lib/labprobe/rescan-loop.json");
	}
}

/* writes obj to path through a temporary file and rename(): a reader sees
 * the old state or the new one, never half of one */
static int save_json(const char *path, struct json_object *obj)
{
	char tmp[340];

	snprintf(tmp, sizeof(tmp), "%.320s.tmp", path);
	if (json_object_to_file_ext(tmp, obj, JSON_C_TO_STRING_PLAIN))
		return -1;
	return rename(tmp, path) ? -1 : 0;
}

/* a task's state letter and start time (clock ticks after boot: field 22
 * of /proc/PID/stat), which tells it from a later task with the same pid;
 * false if there is none */
static bool task_stat(int pid, char *state, long long *start)
{
	char buf[1024], *p;
	FILE *f;
	size_t len;

	snprintf(buf, sizeof(buf), "/proc/%d/stat", pid);
	f = fopen(buf, "r");
	if (!f)
		return false;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	p = strrchr(buf, ')');	/* the name may hold spaces and parentheses */
	return p && sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %lld",
			   state, start) == 2;
}

/* is the loop of this state still running (the same task, not a zombie)? */
static bool loop_alive(struct json_object *st)
{
	struct json_object *v;
	long long start, want;
	char state;
	int pid;

	if (!json_object_object_get_ex(st, "pid", &v) || (pid = json_object_get_int(v)) <= 0)
		return false;
	want = json_object_object_get_ex(st, "pid_start", &v) ? json_object_get_int64(v) : -1;
	return task_stat(pid, &state, &start) && start == want && state != 'Z' && state != 'X';
}

static double jdouble(struct json_object *o, const char *key, double dflt)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && v ? json_object_get_double(v) : dflt;
}

static const char *jstring(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ?
	       json_object_get_string(v) : NULL;
}

/* ---- /proc/lock_stat ---- */

static const char *lock_stat_path(void)
{
	return hook("LABPROBE_LOCK_STAT", "/proc/lock_stat");
}

static const char *const row_fields[] = {
	"con_bounces", "contentions", "waittime_min_us", "waittime_max_us", "waittime_total_us",
	"waittime_avg_us", "acq_bounces", "acquisitions", "holdtime_min_us", "holdtime_max_us",
	"holdtime_total_us", "holdtime_avg_us",
};
#define NFIELDS (sizeof(row_fields) / sizeof(row_fields[0]))

/* a row's values; text[i], when given, is how lock_stat printed value i
 * (kept as the JSON number's text: 1402.92, not 1402.9200000000001) */
static struct json_object *row_json(const double *v, char text[][32])
{
	struct json_object *o = json_object_new_object();

	for (size_t i = 0; i < NFIELDS; i++) {
		if (!strstr(row_fields[i], "_us"))
			json_object_object_add(o, row_fields[i], json_object_new_int64((int64_t)v[i]));
		else if (text)
			json_object_object_add(o, row_fields[i], json_object_new_double_s(v[i], text[i]));
		else
			json_object_object_add(o, row_fields[i], json_object_new_double(v[i]));
	}
	return o;
}

/* Does the printed name (lock_stat's class column, without its ':') belong
 * to class? The class itself; "-W"/"-R" for the write and read rows of a
 * reader-writer lock; "#N"/"/N" for a name's later versions and subclasses. */
static bool name_of_class(const char *name, const char *class)
{
	size_t n = strlen(class);
	const char *rest = name + n;

	if (strncmp(name, class, n))
		return false;
	if ((rest[0] == '#' || rest[0] == '/') && rest[1] >= '0' && rest[1] <= '9') {
		rest += 2;
		if ((rest[0] == '#' || rest[0] == '/') && rest[1] >= '0' && rest[1] <= '9')
			rest += 2;
	}
	return !rest[0] || !strcmp(rest, "-W") || !strcmp(rest, "-R");
}

/* The rows of /proc/lock_stat (kernel/locking/lockdep_proc.c, version
 * 0.4) of the classes named, as {"classes": {name: {field: value}},
 * "lock_debugging": bool}: a row is the name right-aligned in 40 columns
 * and ':' (the contention points below it have no ':' there), then
 * con-bounces, contentions, waittime min/max/total/avg, acq-bounces,
 * acquisitions, holdtime min/max/total/avg. A class with no row (not
 * taken since the statistics were zeroed) gets zeros and "row": false.
 * NULL (and why in *why) when there is no lock_stat to read. */
static struct json_object *lock_stat_read(const char *const *classes, int nclasses, char *why, size_t whylen)
{
	const char *path = lock_stat_path();
	FILE *f = fopen(path, "r");
	struct json_object *out, *rows;
	bool seen[MAX_CLASSES] = { false }, version = false, debugging = true;
	char line[1024];

	if (!f) {
		snprintf(why, whylen, "cannot read %s: %s%s", path, strerror(errno),
			 errno == ENOENT ? " (a kernel without CONFIG_LOCK_STAT)" : "");
		return NULL;
	}
	rows = json_object_new_object();
	while (fgets(line, sizeof(line), f)) {
		char name[48], text[NFIELDS][32];
		const char *p;
		double v[NFIELDS];
		size_t i;
		int c;

		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "lock_stat version ", 18))
			version = true;
		if (strstr(line, "*WARNING* lock debugging disabled"))
			debugging = false;
		if (strlen(line) <= 40 || line[40] != ':')
			continue;
		line[40] = '\0';	/* the name, right-aligned before the ':' */
		for (p = line; *p == ' '; p++)
			;
		scopy(name, sizeof(name), p);
		for (c = 0; c < nclasses && !name_of_class(name, classes[c]); c++)
			;
		if (c == nclasses)
			continue;
		p = line + 41;
		for (i = 0; i < NFIELDS; i++) {
			char *end;

			v[i] = strtod(p, &end);
			if (end == p)
				break;
			while (*p == ' ')
				p++;
			snprintf(text[i], sizeof(text[i]), "%.*s", (int)(end - p < 31 ? end - p : 31), p);
			p = end;
		}
		/* the name column ends the row: nothing but blanks after the numbers */
		while (*p == ' ')
			p++;
		if (*p)
			continue;
		if (i < NFIELDS)
			continue;
		json_object_object_add(rows, name, row_json(v, text));
		seen[c] = true;
	}
	fclose(f);
	for (int c = 0; c < nclasses; c++) {
		if (!seen[c]) {
			double zero[NFIELDS] = { 0 };
			struct json_object *o = row_json(zero, NULL);

			json_object_object_add(o, "row", json_object_new_boolean(false));
			json_object_object_add(rows, classes[c], o);
		}
	}
	out = json_object_new_object();
	json_object_object_add(out, "time_unit", json_object_new_string("us"));
	json_object_object_add(out, "lock_debugging", json_object_new_boolean(debugging));
	if (!version)
		json_object_object_add(out, "note", json_object_new_string("no 'lock_stat version' header: "
									  "the rows may not be what they seem"));
	json_object_object_add(out, "classes", rows);
	return out;
}

/* zeroes every class's statistics: 0 on success, -errno */
static int lock_stat_reset(void)
{
	return write_str(lock_stat_path(), "0\n");
}

/* checks a class name argument: printable, no blanks, at most CLASS_MAX */
static int check_class(const char *opt, const char *s)
{
	size_t len = strlen(s);

	if (!len || len > CLASS_MAX) {
		arg_error("%s takes a lock class name of 1 to %d characters, got '%s'", opt, CLASS_MAX, s);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] <= ' ' || s[i] > '~') {
			arg_error("%s takes a lock class name without blanks or control characters, got '%s'",
				  opt, s);
			return -1;
		}
	}
	return 0;
}

int cmd_lockstat(int argc, char **argv, struct json_object *out)
{
	enum { OPT_RESET = OPT_FIRST };
	static const struct option opts[] = {
		{ "reset", no_argument, NULL, OPT_RESET },
		{ NULL, 0, NULL, 0 },
	};
	const char *classes[MAX_CLASSES];
	int n = 0, opt;
	bool reset = false;
	struct json_object *ls;
	char why[400];

	/* CLASS arguments may come before, between or after the options */
	while ((opt = next_opt(argc, argv, opts, true)) != -1) {
		switch (opt) {
		case OPT_RESET:
			reset = true;
			break;
		case 1:
			/* "-" alone: the one argument starting with '-' that is no option */
			if (optarg[0] == '-') {
				arg_error("unknown argument '%s'", optarg);
				return 2;
			}
			if (n == MAX_CLASSES) {
				arg_error("names more than %d lock classes", MAX_CLASSES);
				return 2;
			}
			if (check_class("CLASS", optarg))
				return 2;
			classes[n++] = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!n)
		classes[n++] = DEFAULT_CLASS;
	ls = lock_stat_read(classes, n, why, sizeof(why));
	if (!ls) {
		json_object_object_add(out, "lock_stat", NULL);
		json_object_object_add(out, "error", json_object_new_string(why));
		return 1;
	}
	json_object_object_add(out, "lock_stat", ls);
	if (reset) {
		int r = lock_stat_reset();

		json_object_object_add(out, "reset", json_object_new_boolean(r == 0));
		if (r) {
			snprintf(why, sizeof(why), "cannot zero %s: %s", lock_stat_path(), strerror(-r));
			json_object_object_add(out, "error", json_object_new_string(why));
			return 1;
		}
	}
	return 0;
}

/* ---- the loop ---- */

static volatile sig_atomic_t loop_stop;

static void on_stop(int sig)
{
	(void)sig;
	loop_stop = 1;
}

/* sleeps until CLOCK_MONOTONIC t, or a stop signal */
static void sleep_until(double t)
{
	while (!loop_stop) {
		double left = t - now_mono();
		struct timespec ts;

		if (left <= 0)
			return;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);	/* EINTR: the loop looks at loop_stop */
	}
}

/* The detached process: rescans until SIGTERM, keeping st in live. */
static void __attribute__((noreturn)) rescan_loop(const char *live, struct json_object *st, int interval_ms,
						  int ready_fd)
{
	const char *target = hook("LABPROBE_RESCAN", "/sys/bus/pci/rescan");
	struct sigaction sa = { .sa_handler = on_stop };
	sigset_t none;
	long long rescans = 0, errors = 0, start;
	double next, max_ms = 0, total_ms = 0;
	char state;
	int fd;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);	/* the agent may have blocked some */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (chdir("/"))
		_exit(1);
	fd = open("/dev/null", O_RDWR);
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);

	json_object_object_add(st, "pid", json_object_new_int(getpid()));
	json_object_object_add(st, "pid_start",
			       json_object_new_int64(task_stat(getpid(), &state, &start) ? start : -1));
	json_object_object_add(st, "running", json_object_new_boolean(true));
	json_object_object_add(st, "started_mono", json_object_new_double(now_mono()));
	save_json(live, st);
	close(ready_fd);	/* start reads EOF: the state is there */

	next = now_mono();
	while (!loop_stop) {
		double t0 = now_mono(), ms;
		int err = 0, w;

		json_object_object_add(st, "in_rescan_since_mono", json_object_new_double(t0));
		save_json(live, st);
		w = open(target, O_WRONLY | O_CLOEXEC);
		if (w < 0) {
			err = errno;
		} else {
			errno = 0;
			if (write(w, "1", 1) != 1)
				err = errno ? errno : EIO;
			if (close(w) && !err)
				err = errno;
		}
		ms = (now_mono() - t0) * 1e3;
		if (err) {
			char e[300];

			errors++;
			snprintf(e, sizeof(e), "%s: %s", target, strerror(err));
			json_object_object_add(st, "last_error", json_object_new_string(e));
		} else {
			rescans++;
		}
		if (ms > max_ms)
			max_ms = ms;
		total_ms += ms;
		json_object_object_add(st, "in_rescan_since_mono", NULL);
		json_object_object_add(st, "rescans", json_object_new_int64(rescans));
		json_object_object_add(st, "errors", json_object_new_int64(errors));
		json_object_object_add(st, "rescan_ms_max", json_object_new_double(max_ms));
		json_object_object_add(st, "rescan_ms_total", json_object_new_double(total_ms));
		json_object_object_add(st, "updated_mono", json_object_new_double(now_mono()));
		save_json(live, st);
		next += interval_ms / 1e3;
		if (next < now_mono())
			next = now_mono();	/* late: the next one now, none caught up */
		sleep_until(next);
	}
	json_object_object_add(st, "running", json_object_new_boolean(false));
	json_object_object_add(st, "stopped_mono", json_object_new_double(now_mono()));
	save_json(live, st);
	_exit(0);
}

/* Stops the loop of state st (same boot): SIGTERM, then waits up to
 * timeout s for it to end. True when it ended. */
static bool stop_loop(struct json_object *st, double timeout)
{
	struct json_object *v;
	int pid = json_object_object_get_ex(st, "pid", &v) ? json_object_get_int(v) : 0;
	double deadline = now_mono() + timeout;

	if (pid <= 0 || !loop_alive(st))
		return true;
	kill(pid, SIGTERM);
	while (loop_alive(st)) {
		if (now_mono() > deadline)
			return false;
		sleep_s(0.05);
	}
	return true;
}

static void counts_to(struct json_object *out, struct json_object *st)
{
	static const char *const keys[] = { "rescans", "errors", "interval_ms", "last_error" };
	double rescans = jdouble(st, "rescans", 0), total = jdouble(st, "rescan_ms_total", 0);
	struct json_object *ms = json_object_new_object();

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		struct json_object *v;

		json_object_object_add(out, keys[i], json_object_object_get_ex(st, keys[i], &v) && v ?
				       json_object_get(v) : (strcmp(keys[i], "last_error") ?
							     json_object_new_int(0) : NULL));
	}
	json_object_object_add(ms, "max", ms3(jdouble(st, "rescan_ms_max", 0)));
	json_object_object_add(ms, "total", ms3(total));
	json_object_object_add(ms, "mean", rescans + jdouble(st, "errors", 0) > 0 ?
			       ms3(total / (rescans + jdouble(st, "errors", 0))) : NULL);
	json_object_object_add(out, "rescan_ms", ms);
}

static int loop_start(int argc, char **argv, struct json_object *out)
{
	char live[320], startf[320], bid[64], why[400];
	const char *target = hook("LABPROBE_RESCAN", "/sys/bus/pci/rescan");
	enum { OPT_INTERVAL = OPT_FIRST, OPT_KEEP };
	static const struct option opts[] = {
		{ "interval-ms", required_argument, NULL, OPT_INTERVAL },
		{ "keep-lock-stat", no_argument, NULL, OPT_KEEP },
		{ NULL, 0, NULL, 0 },
	};
	int interval = 200, pipefd[2], opt;
	bool keep = false;
	struct json_object *st, *old, *mark, *ls;
	pid_t pid;
	ssize_t r;
	char c;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_INTERVAL:
			if (parse_int_opt("--interval-ms", optarg, 1, 3600000, &interval))
				return 2;
			break;
		case OPT_KEEP:
			keep = true;
			break;
		default:
			return 2;
		}
	}
	state_paths(live, startf, sizeof(live));
	boot_id(bid, sizeof(bid));
	json_object_object_add(out, "action", json_object_new_string("start"));
	if (access(target, W_OK)) {
		snprintf(why, sizeof(why), "cannot write %s: %s", target, strerror(errno));
		json_object_object_add(out, "error", json_object_new_string(why));
		return 1;
	}

	/* a loop still running (a stop that never came) is stopped first */
	old = json_object_from_file(live);
	if (old) {
		const char *ob = jstring(old, "boot_id");

		if (ob && !strcmp(ob, bid) && loop_alive(old)) {
			struct json_object *prev = json_object_new_object();

			json_object_object_add(prev, "stopped", json_object_new_boolean(stop_loop(old, 120)));
			json_object_put(old);
			old = json_object_from_file(live);
			if (old)
				counts_to(prev, old);
			json_object_object_add(out, "replaced", prev);
		}
		json_object_put(old);
	}

	st = json_object_new_object();
	json_object_object_add(st, "boot_id", json_object_new_string(bid));
	json_object_object_add(st, "interval_ms", json_object_new_int(interval));
	json_object_object_add(st, "target", json_object_new_string(target));
	json_object_object_add(st, "rescans", json_object_new_int(0));
	json_object_object_add(st, "errors", json_object_new_int(0));
	json_object_object_add(st, "kmsg_seq", kmsg_last_seq_json());
	if (access(lock_stat_path(), F_OK)) {
		json_object_object_add(st, "lock_stat_reset", NULL);
	} else if (keep) {
		json_object_object_add(st, "lock_stat_reset", json_object_new_boolean(false));
	} else {
		int e = lock_stat_reset();

		json_object_object_add(st, "lock_stat_reset", json_object_new_boolean(e == 0));
		if (e) {
			snprintf(why, sizeof(why), "cannot zero %s: %s", lock_stat_path(), strerror(-e));
			json_object_object_add(out, "lock_stat_error", json_object_new_string(why));
		}
	}
	/* the kernel's statistics right after the reset: the acquisitions the
	 * loop's window starts from (none, unless the lock was taken since) */
	{
		const char *cls[] = { DEFAULT_CLASS };

		ls = lock_stat_read(cls, 1, why, sizeof(why));
		json_object_object_add(out, "lock_stat", ls);
	}

	mark = json_object_new_object();
	json_object_object_add(mark, "boot_id", json_object_new_string(bid));
	json_object_object_add(mark, "interval_ms", json_object_new_int(interval));
	if (!getenv("LABPROBE_RESCAN_STATE") || !getenv("LABPROBE_RESCAN_STATE")[0])
		mkdir_p("/var/lib/labprobe", 0755);
	if (save_json(startf, mark)) {
		snprintf(why, sizeof(why), "cannot write %s: %s", startf, strerror(errno));
		json_object_object_add(out, "error", json_object_new_string(why));
		json_object_put(mark);
		json_object_put(st);
		return 1;
	}
	json_object_put(mark);

	if (pipe(pipefd)) {
		json_object_object_add(out, "error", json_object_new_string(strerror(errno)));
		json_object_put(st);
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		setsid();
		if (fork() == 0)
			rescan_loop(live, st, interval, pipefd[1]);
		_exit(0);
	}
	close(pipefd[1]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	/* EOF once the loop wrote its first state (or died before) */
	while ((r = read(pipefd[0], &c, 1)) < 0 && errno == EINTR)
		;
	close(pipefd[0]);
	json_object_put(st);

	st = json_object_from_file(live);
	if (pid < 0 || !st || !loop_alive(st)) {
		json_object_object_add(out, "error", json_object_new_string(pid < 0 ? "fork failed" :
									   "the loop did not start"));
		json_object_put(st);
		return 1;
	}
	json_object_object_add(out, "pid", json_object_get(json_object_object_get(st, "pid")));
	json_object_object_add(out, "interval_ms", json_object_new_int(interval));
	json_object_object_add(out, "lock_stat_reset",
			       json_object_get(json_object_object_get(st, "lock_stat_reset")));
	json_object_object_add(out, "kmsg_seq", json_object_get(json_object_object_get(st, "kmsg_seq")));
	json_object_put(st);
	return 0;
}

static int loop_stop_cmd(int argc, char **argv, struct json_object *out)
{
	char live[320], startf[320], bid[64], why[400];
	enum { OPT_TIMEOUT = OPT_FIRST, OPT_CLASS };
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "class", required_argument, NULL, OPT_CLASS },
		{ NULL, 0, NULL, 0 },
	};
	const char *classes[MAX_CLASSES];
	int nclasses = 0, opt;
	double timeout = 120;
	struct json_object *st, *mark, *ls;
	bool running, stopped, ok = true;
	const char *b;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_TIMEOUT:
			if (parse_double_opt("--timeout", optarg, 0, TIMEOUT_MAX, &timeout))
				return 2;
			break;
		case OPT_CLASS:
			if (nclasses == MAX_CLASSES) {
				arg_error("--class: more than %d lock classes", MAX_CLASSES);
				return 2;
			}
			if (check_class("--class", optarg))
				return 2;
			classes[nclasses++] = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!nclasses)
		classes[nclasses++] = DEFAULT_CLASS;
	state_paths(live, startf, sizeof(live));
	boot_id(bid, sizeof(bid));
	json_object_object_add(out, "action", json_object_new_string("stop"));

	st = json_object_from_file(live);
	mark = json_object_from_file(startf);
	b = st ? jstring(st, "boot_id") : NULL;
	if (!st || !b || strcmp(b, bid)) {
		/* no loop of this boot: none was started, or the guest rebooted */
		const char *mb = mark ? jstring(mark, "boot_id") : NULL;
		bool rebooted = (mb && strcmp(mb, bid)) || (b && strcmp(b, bid));

		json_object_object_add(out, "state", json_object_new_string(rebooted ? "rebooted" : "none"));
		json_object_object_add(out, "running_at_stop", json_object_new_boolean(false));
		json_object_object_add(out, "rebooted", json_object_new_boolean(rebooted));
		json_object_object_add(out, "rescans", NULL);
		json_object_object_add(out, "errors", NULL);
		json_object_object_add(out, "ran_ms", NULL);
		json_object_object_add(out, "lock_stat", NULL);
		json_object_object_add(out, "note", json_object_new_string(rebooted ?
			"the guest rebooted since the loop started: the loop, its counts and the kernel's lock "
			"statistics of that boot are gone" : "no rescan loop was started"));
		json_object_put(st);
		json_object_put(mark);
		unlink(startf);
		return 1;
	}
	json_object_put(mark);

	running = loop_alive(st);
	stopped = stop_loop(st, timeout);
	json_object_put(st);
	st = json_object_from_file(live);
	if (!st) {
		json_object_object_add(out, "error", json_object_new_string("the loop's state went away"));
		return 1;
	}
	json_object_object_add(out, "running_at_stop", json_object_new_boolean(running));
	counts_to(out, st);
	if (!stopped) {
		/* a rescan blocked in the kernel: the loop cannot be ended */
		double since = jdouble(st, "in_rescan_since_mono", -1);

		json_object_object_add(out, "state", json_object_new_string("stuck"));
		json_object_object_add(out, "stuck", json_object_new_boolean(true));
		json_object_object_add(out, "in_rescan_ms", since >= 0 ? ms3((now_mono() - since) * 1e3) : NULL);
		json_object_object_add(out, "ran_ms", ms3((now_mono() - jdouble(st, "started_mono", now_mono())) * 1e3));
		ok = false;
	} else {
		double end = jdouble(st, "stopped_mono", jdouble(st, "updated_mono", now_mono()));

		json_object_object_add(out, "state", json_object_new_string(running ? "stopped" : "died"));
		json_object_object_add(out, "ran_ms", ms3((end - jdouble(st, "started_mono", end)) * 1e3));
		if (!running) {
			json_object_object_add(out, "note", json_object_new_string(
				"the loop was gone before stop: it ended without being asked to"));
			ok = false;
		}
		unlink(live);
		unlink(startf);
	}
	if (jdouble(st, "errors", 0) > 0)
		ok = false;

	ls = lock_stat_read(classes, nclasses, why, sizeof(why));
	json_object_object_add(out, "lock_stat", ls);
	if (!ls)
		json_object_object_add(out, "lock_stat_note", json_object_new_string(why));

	/* the kernel log since start: what the loop's window reported */
	{
		struct json_object *seq;
		struct json_object *f;

		if (json_object_object_get_ex(st, "kmsg_seq", &seq) && seq) {
			f = findings_scan((unsigned long long)json_object_get_int64(seq), 8);
			json_object_object_add(out, "kmsg_since_seq", json_object_get(seq));
		} else {
			f = findings_scan(0, 8);	/* start could not read the log: all of it */
		}
		if (json_object_array_length(f))
			ok = false;
		json_object_object_add(out, "findings", f);
		json_object_object_add(out, "kmsg_last_seq", kmsg_last_seq_json());
	}
	json_object_put(st);
	return ok ? 0 : 1;
}

/* argv[0] "rescan-loop", argv[1] the action: loop_start() and
 * loop_stop_cmd() get argv from the action on (their getopt_long's argv[0]) */
int cmd_rescan_loop(int argc, char **argv, struct json_object *out)
{
	if (argc >= 2 && !strcmp(argv[1], "start"))
		return loop_start(argc - 1, argv + 1, out);
	if (argc >= 2 && !strcmp(argv[1], "stop"))
		return loop_stop_cmd(argc - 1, argv + 1, out);
	fprintf(stderr, "labprobe rescan-loop: start or stop, got '%s'\n", argc >= 2 ? argv[1] : "");
	return 2;
}
