/* The fio jobs of the hot-removal measurement: arm's verifying jobs on
 * the armed drives, one fio process with a job per drive, run by a
 * background supervisor that records when each job ends (collect reads
 * what it writes, and stops it); fio_argv and fio_job_errors also serve
 * drives' write+verify. */
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

/* Which jobs' drives fio holds open now (a job closes its file when it
 * ends: that is the moment it saw its error). */
static void fio_open_files(pid_t pid, struct slot *slots, int n, bool *open)
{
	char path[64], link[128], target[128];
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
			size_t l = strlen(slots[i].nss[0]);

			/* "/dev/nvme0n1", or "... (deleted)" once the drive is gone */
			if (slots[i].fio && slots[i].nns && !strncmp(target, "/dev/", 5) &&
			    !strncmp(target + 5, slots[i].nss[0], l) &&
			    (target[5 + l] == '\0' || target[5 + l] == ' '))
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
 * that the supervisor sleeps until a job closes its drive instead of
 * scanning fio's file descriptors every 20 ms: during a bulk yank that scan
 * took the vCPUs the teardown being timed needs. Set up before fio starts,
 * so every open of the node is counted. Returns the inotify descriptor, or
 * -1 (the supervisor then scans /proc as before). */
static int fio_watch(struct slot *slots, int n, int *wd)
{
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	char node[80];

	for (int i = 0; i < n; i++) {
		wd[i] = -1;
		if (fd < 0 || !slots[i].fio || !slots[i].nns)
			continue;
		snprintf(node, sizeof(node), "/dev/%.40s", slots[i].nss[0]);
		wd[i] = inotify_add_watch(fd, node, IN_OPEN | IN_CLOSE);
		if (wd[i] < 0) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* Count the opens and closes inotify reports; false on a queue overflow
 * (the counts are lost: the caller scans /proc). */
static bool fio_watch_read(int fd, const int *wd, int n, int *opens)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool ok = true;
	ssize_t len;

	while ((len = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW)
				ok = false;
			for (int i = 0; i < n; i++) {
				if (wd[i] != ev->wd)
					continue;
				if (ev->mask & IN_OPEN)
					opens[i]++;
				if ((ev->mask & IN_CLOSE) && opens[i] > 0)
					opens[i]--;
				if (ev->mask & IN_IGNORED)	/* node gone, last holder closed */
					opens[i] = 0;
			}
		}
	}
	return ok;
}

/* The background supervisor of arm's fio: records in D/fio-SLOT.end when
 * each job closed its drive (inotify on the drives' nodes; a /proc scan
 * every 20 ms if that cannot be set up), and once fio is gone
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
	bool is_open[MAXS], started[MAXS] = { false }, ended[MAXS] = { false }, counted;
	unsigned long long io0[MAXS];
	double end[MAXS], closed_at[MAXS];
	int err[MAXS], wd[MAXS], opens[MAXS] = { 0 }, status = 0, ifd, pfd = -1;
	pid_t pid;

	signal(SIGCHLD, SIG_DFL);	/* the agent may have left it ignored */
	snprintf(out, sizeof(out), "--output=%.200s/fio.json", dir);
	snprintf(rt, sizeof(rt), "--runtime=%d", runtime);
	fio_argv(argv, (int)(sizeof(argv) / sizeof(argv[0])), globals, slots, n, names, files);
	for (int i = 0; i < n; i++) {
		io0[i] = slots[i].fio && slots[i].nns ? ns_io(slots[i].nss[0]) : 0;
		closed_at[i] = -1;
	}
	ifd = fio_watch(slots, n, wd);
	pid = fork();
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		execvp("fio", argv);
		_exit(127);
	}
	if (pid > 0)
		pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* counted: is_open comes from the inotify counts, else from /proc */
	counted = ifd >= 0 && pfd >= 0;
	signal(SIGINT, SIG_IGN);
	while (pid > 0 && waitpid(pid, &status, WNOHANG) == 0) {
		bool all_started = true;
		double next = -1;

		if (counted)
			counted = fio_watch_read(ifd, wd, n, opens);
		if (counted) {
			for (int i = 0; i < n; i++)
				is_open[i] = opens[i] > 0;
		} else {
			fio_open_files(pid, slots, n, is_open);
		}
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
		if (!counted || !all_started) {
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

	if (read_linef(line, sizeof(line), "/sys/block/%s/stat", ns) < 0)
		return 0;
	sscanf(line, "%llu %llu %llu %llu %llu", &r, &x, &x, &x, &w);
	return r + w;
}
