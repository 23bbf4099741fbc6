/* The fio jobs of the hot-removal measurement: arm's verifying jobs on
 * the armed drives, one fio process with a job per drive, run by a
 * background supervisor that records when each job ends (collect reads
 * what it writes, and stops it); fio_argv and fio_job_errors also serve
 * drives' write+verify.
 *
 *   labprobe supervise --dir D [--fio-runtime S]
 *
 * runs the supervisor in the foreground on the drives of arm's
 * D/state.json that have a job, for tests on a host: LABPROBE_DEV=DIR
 * holds the drives' nodes instead of /dev (supervise refuses to run
 * without it), LABPROBE_SYS_BLOCK=DIR their NS/stat instead of /sys/block,
 * and fio is the one PATH finds. */
#include "labprobe.h"

#include <dirent.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Kill an armed fio group and wait until it is gone: a killed fio's direct
 * writes in flight still land while it exits, and would overwrite what the
 * next step writes to the same drive (seen: a write+verify right after an
 * aer-recovery collect failed while a forked fio job wrote on). Waits up to 10 s. */
void kill_fio_group(pid_t pgid)
{
	kill(-pgid, SIGKILL);
	for (int i = 0; i < 200 && kill(-pgid, 0) == 0; i++)
		usleep(50000);
}

/* One fio process runs a job per drive: Debian's fio links librados,
 * librbd and glusterfs, and loading them costs a second or more of CPU
 * per process under TCG, so a process per drive made arming 16 drives
 * take half a minute. GLOBALS apply to every job; each job is named
 * after its slot. */
int fio_argv(char **argv, int max, char *const *globals, struct slot *slots, int n,
		    char names[][48], char files[][64])
{
	int argc = 0;

	argv[argc++] = "fio";
	for (int g = 0; globals[g] && argc < max - 3; g++)
		argv[argc++] = globals[g];
	for (int i = 0; i < n && argc < max - 3; i++) {
		if (!slots[i].fio || !slots[i].nns)
			continue;
		snprintf(names[i], 48, "--name=%.40s", slots[i].name);
		snprintf(files[i], 64, "--filename=/dev/%.31s", slots[i].nss[0]);
		argv[argc++] = names[i];
		argv[argc++] = files[i];
	}
	argv[argc] = NULL;
	return argc;
}

/* the directory of the drives' nodes: /dev (LABPROBE_DEV in tests) */
static const char *dev_dir(void)
{
	return hook("LABPROBE_DEV", "/dev");
}

/* Which jobs' drives fio holds open now (a job closes its file when it
 * ends: that is the moment it saw its error). */
static void fio_open_files(pid_t pid, struct slot *slots, int n, bool *open)
{
	char path[64], link[128], target[320], node[300];
	DIR *d;
	struct dirent *e;

	memset(open, 0, sizeof(bool) * (size_t)n);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		ssize_t len;

		snprintf(link, sizeof(link), "%s/%.40s", path, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = '\0';
		for (int i = 0; i < n; i++) {
			size_t l;

			if (!slots[i].fio || !slots[i].nns)
				continue;
			/* "/dev/nvme0n1", or "... (deleted)" once the drive is gone */
			snprintf(node, sizeof(node), "%.250s/%.40s", dev_dir(), slots[i].nss[0]);
			l = strlen(node);
			if (!strncmp(target, node, l) && (target[l] == '\0' || target[l] == ' '))
				open[i] = true;
		}
	}
	if (d)
		closedir(d);
}

/* fio's own error code of each job (0 none, EIO, EILSEQ: verify
 * mismatch) from its JSON report, -1 for a job it did not report on. */
void fio_job_errors(const char *report, struct slot *slots, int n, int *err)
{
	struct json_object *o = NULL, *jobs = NULL, *v;
	char *text = NULL, *at;
	size_t cap = 0;
	FILE *f = fopen(report, "r");

	/* fio logs into its output file too ("fio: terminating on signal
	 * 2"): the report starts at the first line that opens an object */
	if (f && getdelim(&text, &cap, '\0', f) > 0) {
		at = text[0] == '{' ? text : strstr(text, "\n{");
		if (at)
			o = json_tokener_parse(at);
	}
	free(text);
	if (f)
		fclose(f);

	for (int i = 0; i < n; i++)
		err[i] = -1;
	if (o)
		json_object_object_get_ex(o, "jobs", &jobs);
	for (size_t k = 0; jobs && k < json_object_array_length(jobs); k++) {
		struct json_object *job = json_object_array_get_idx(jobs, k);
		const char *name;

		if (!json_object_object_get_ex(job, "jobname", &v))
			continue;
		name = json_object_get_string(v);
		for (int i = 0; i < n; i++)
			if (!strcmp(slots[i].name, name) && json_object_object_get_ex(job, "error", &v))
				err[i] = json_object_get_int(v);
	}
	json_object_put(o);
}

/* D/fio-SLOT.EXT: one line, what FMT makes */
static void write_job_file(const char *dir, const char *slot, const char *ext, const char *fmt, ...)
{
	char path[300];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%.200s/fio-%.40s.%s", dir, slot, ext);
	f = fopen(path, "w");
	if (!f)
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* Watch each fio drive's device node for opens and closes (inotify), so
 * that the supervisor sleeps until a drive is opened or closed instead of
 * scanning fio's file descriptors every 20 ms: during a bulk yank that scan
 * took the vCPUs the teardown being timed needs. The events only wake the
 * supervisor; whether fio holds a drive is read from fio's own descriptors.
 * Counting the events cannot tell: udev opens a node after every close of
 * a write (fio closes and reopens a time_based job's file every pass), an
 * open that came before the watch is closed after it, and inotify merges
 * an open with one queued before it that was not read yet. The count then
 * went to 0 while fio wrote on, and the job's end was taken seconds before
 * the yank (issue 36). Returns the inotify descriptor, or -1 (the
 * supervisor then scans every 20 ms as before). */
static int fio_watch(struct slot *slots, int n)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	char node[300];

	for (int i = 0; fd >= 0 && i < n; i++) {
		if (!slots[i].fio || !slots[i].nns)
			continue;
		snprintf(node, sizeof(node), "%.250s/%.40s", dev_dir(), slots[i].nss[0]);
		if (inotify_add_watch(fd, node, IN_OPEN | IN_CLOSE) < 0) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

/* Reads what inotify queued: the events are only a wake-up (an overflow
 * too: the scan after it sees the drives as they are). */
static void fio_watch_drain(int fd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* The background supervisor of arm's fio: records in D/fio-SLOT.end when
 * each job closed its drive (fio's descriptors, read when inotify reports
 * an open or close of a drive's node; every 20 ms until every job started,
 * or if that cannot be set up), and once fio is gone
 * D/fio-SLOT.exit "ERROR" per job, ERROR being fio's error code of the
 * job (its exit status if it wrote no report: killed); then D/fio.done.
 * collect stops fio with SIGINT, which the supervisor ignores. */
void supervise(const char *dir, struct slot *slots, int n, int runtime)
{
	static char names[MAXS][48], files[MAXS][64];
	char *argv[24 + 2 * MAXS], out[300], rt[32], path[300];
	char *globals[] = { "--thread", "--ioengine=libaio", "--direct=1", "--rw=randwrite", "--bs=4k",
			    "--iodepth=8", "--size=16M", "--time_based", rt, "--verify=crc32c",
			    "--verify_backlog=256", "--verify_fatal=1", "--output-format=json", out, NULL };
	bool is_open[MAXS], started[MAXS] = { false }, ended[MAXS] = { false }, watched;
	unsigned long long io0[MAXS];
	double end[MAXS], closed_at[MAXS];
	int err[MAXS], status = 0, ifd, pfd = -1;
	pid_t pid;

	signal(SIGCHLD, SIG_DFL);	/* the agent may have left it ignored */
	snprintf(out, sizeof(out), "--output=%.200s/fio.json", dir);
	snprintf(rt, sizeof(rt), "--runtime=%d", runtime);
	fio_argv(argv, (int)(sizeof(argv) / sizeof(argv[0])), globals, slots, n, names, files);
	for (int i = 0; i < n; i++) {
		io0[i] = slots[i].fio && slots[i].nns ? ns_io(slots[i].nss[0]) : 0;
		closed_at[i] = -1;
	}
	/* before fio starts: none of its opens and closes is missed */
	ifd = fio_watch(slots, n);
	pid = fork();
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		execvp("fio", argv);
		_exit(127);
	}
	if (pid > 0)
		pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* watched: asleep between events once every job started */
	watched = ifd >= 0 && pfd >= 0;
	signal(SIGINT, SIG_IGN);
	while (pid > 0 && waitpid(pid, &status, WNOHANG) == 0) {
		bool all_started = true;
		double next = -1;

		if (ifd >= 0)
			fio_watch_drain(ifd);
		/* after the events read: a close of fio's is seen by now */
		fio_open_files(pid, slots, n, is_open);
		for (int i = 0; i < n; i++) {
			/* started: open with I/O done (fio also opens each drive
			 * briefly while it sets up, to size it) */
			if (is_open[i] && !started[i] && ns_io(slots[i].nss[0]) > io0[i] + 16)
				started[i] = true;
			all_started &= started[i] || !slots[i].fio || !slots[i].nns;
			if (!started[i] || ended[i])
				continue;
			/* fio also closes and reopens a time_based job's file
			 * when it wraps around: closed for 0.5 s is an end */
			if (is_open[i])
				closed_at[i] = -1;
			else if (closed_at[i] < 0)
				closed_at[i] = now_mono();
			else if (now_mono() - closed_at[i] >= 0.5) {
				ended[i] = true;
				end[i] = closed_at[i];
				write_job_file(dir, slots[i].name, "end", "%.6f\n", end[i]);
			}
			if (!ended[i] && closed_at[i] >= 0 && (next < 0 || closed_at[i] + 0.5 < next))
				next = closed_at[i] + 0.5;
		}
		if (!watched || !all_started) {
			/* started is I/O done, which wakes no one */
			usleep(20000);
		} else {
			/* asleep until a drive is opened or closed, fio ends, or
			 * a closed job's 0.5 s are over */
			struct pollfd pf[2] = { { .fd = ifd, .events = POLLIN }, { .fd = pfd, .events = POLLIN } };
			int ms = next < 0 ? -1 : (int)ceil((next - now_mono()) * 1000);

			poll(pf, 2, next < 0 ? -1 : ms < 1 ? 1 : ms);
		}
	}
	if (ifd >= 0)
		close(ifd);
	if (pfd >= 0)
		close(pfd);
	snprintf(path, sizeof(path), "%.200s/fio.json", dir);
	fio_job_errors(path, slots, n, err);
	for (int i = 0; i < n; i++) {
		if (!slots[i].fio || !slots[i].nns)
			continue;
		if (!ended[i]) {
			end[i] = closed_at[i] >= 0 ? closed_at[i] : now_mono();
			write_job_file(dir, slots[i].name, "end", "%.6f\n", end[i]);
		}
		write_job_file(dir, slots[i].name, "exit", "%d\n", err[i] >= 0 ? err[i] :
			       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	}
	snprintf(path, sizeof(path), "%.200s/fio.done", dir);
	status = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (status >= 0)
		close(status);
}

unsigned long long ns_io(const char *ns)
{
	char line[256];
	unsigned long long r = 0, w = 0, x;

	if (read_linef(line, sizeof(line), "%.250s/%.40s/stat", hook("LABPROBE_SYS_BLOCK", "/sys/block"), ns) < 0)
		return 0;
	sscanf(line, "%llu %llu %llu %llu %llu", &r, &x, &x, &x, &w);
	return r + w;
}

int cmd_supervise(int argc, char **argv, struct json_object *out)
{
	enum { OPT_DIR = OPT_FIRST, OPT_FIO_RUNTIME };
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, OPT_DIR },
		{ "fio-runtime", required_argument, NULL, OPT_FIO_RUNTIME },
		{ NULL, 0, NULL, 0 },
	};
	static struct slot slots[MAXS];
	struct json_object *state, *arr, *res;
	const char *dir = NULL;
	int nslots = 0, runtime = 300, opt;
	char path[300], line[64];

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_DIR:
			dir = optarg;
			if (check_path_opt("--dir", dir))
				return 2;
			break;
		case OPT_FIO_RUNTIME:
			if (parse_int_opt("--fio-runtime", optarg, 1, TIMEOUT_MAX, &runtime))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "labprobe supervise: --dir is required\n");
		return 2;
	}
	/* a test's: arm is what runs fio on a guest's drives */
	if (!getenv("LABPROBE_DEV") || !getenv("LABPROBE_DEV")[0]) {
		fprintf(stderr, "labprobe supervise: a test hook: LABPROBE_DEV must name the drives' nodes\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/state.json", dir);
	state = json_object_from_file(path);
	if (!state || !json_object_object_get_ex(state, "slots", &arr) || !json_object_is_type(arr, json_type_array)) {
		fprintf(stderr, "labprobe supervise: no slots in %s\n", path);
		json_object_put(state);
		return 2;
	}
	for (size_t i = 0; i < json_object_array_length(arr) && nslots < MAXS; i++) {
		if (slot_from_json(json_object_array_get_idx(arr, i), &slots[nslots]))
			continue;
		/* its name names files in D */
		if (check_slot("--dir", slots[nslots].name)) {
			json_object_put(state);
			return 2;
		}
		nslots++;
	}
	json_object_put(state);
	fflush(NULL);
	supervise(dir, slots, nslots, runtime);

	/* what it wrote, as collect reads it */
	res = json_object_new_array();
	for (int i = 0; i < nslots; i++) {
		struct json_object *o;

		if (!slots[i].fio || !slots[i].nns)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "slot", json_object_new_string(slots[i].name));
		json_object_object_add(o, "end", read_linef(line, sizeof(line), "%.200s/fio-%.40s.end", dir,
							    slots[i].name) < 0 ? NULL :
				       json_object_new_double(strtod(line, NULL)));
		json_object_object_add(o, "exit", read_linef(line, sizeof(line), "%.200s/fio-%.40s.exit", dir,
							     slots[i].name) < 0 ? NULL :
				       json_object_new_int(atoi(line)));
		json_object_array_add(res, o);
	}
	json_object_object_add(out, "jobs", res);
	return 0;
}
