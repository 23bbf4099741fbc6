/* The domain's run state under hpslot: the per-domain lock, signals
 * deferred while the domain is stopped, stopping and resuming it (with the
 * pause recorded in the lock file), and recovering a pause an earlier
 * hpslot left. Below the topology and config-space access (topo.c reads
 * 0xCF8/0xCFC in a pause), above the monitor transport (mon.c). */
#include "hpslot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* While the VM is stopped (or a slot half-written) a terminating signal must
 * wait until the domain runs again. Blocking signals is not enough: libvirt's
 * event thread would take them. So handlers record the signal during a
 * critical section and re-raise it at its end. */
static volatile sig_atomic_t in_critical, pending_sig;

static void on_signal(int sig)
{
	if (in_critical) {
		pending_sig = sig;
		return;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void hp_signals_install(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGALRM, SIGUSR1, SIGUSR2 };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

void hp_signals_block(bool block)
{
	if (block) {
		in_critical++;
		return;
	}
	if (in_critical > 0 && --in_critical == 0 && pending_sig) {
		int sig = pending_sig;
		pending_sig = 0;
		fprintf(stderr, "hpslot: signal %d arrived while the domain was paused; resumed, now exiting\n", sig);
		signal(sig, SIG_DFL);
		raise(sig);
	}
}

/* ---- the per-domain lock ---------------------------------------------- */

/* Pauses and 0xCF8/0xCFC sequences of two hpslot processes on one domain
 * must not interleave: a per-domain flock around each of them (the lock
 * dies with the process). The lock file also records who holds it and,
 * while the domain is stopped, that it was stopped (hpslot.h). */
static int lock_fd = -1, lock_depth;
static char lock_path[HP_LOCK_NAME_MAX + 600];
static const char *lock_cmd = "hpslot";
static long long lock_since;
static char lock_pause[sizeof(((struct hp_lock_record *)0)->paused_line) + 2];	/* the pause line in the file, "" none */
static struct hp_lock_record lock_found;	/* what the file said when the lock was taken */

const char *hp_lock_dir(void)
{
	const char *d = getenv("HPSLOT_LOCK_DIR");
	return d && *d ? d : HP_LOCK_DIR_DEFAULT;
}

void hp_lock_set_cmd(const char *cmd)
{
	lock_cmd = cmd && *cmd ? cmd : "hpslot";
}

static void iso_time(long long t, char *buf, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;
	if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, len, "an unknown time");
}

static bool pid_alive(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static int mkdir_0700(const char *path, char *err, size_t len)
{
	if (!mkdir(path, 0700) || errno == EEXIST)
		return 0;
	snprintf(err, len, "cannot create the lock directory %s: %s", path, strerror(errno));
	return -1;
}

/* The lock directory, created (with its parent) if missing, opened after
 * checking it is a real directory of ours that nobody else may enter; its
 * fd or -1. */
static int lock_dir_open(char *dir, size_t dirlen, char *err, size_t len)
{
	const char *env = hp_lock_dir();
	char parent[512];
	struct stat st, fst;
	uid_t me = geteuid();
	int dfd;

	if (env[0] != '/' || strlen(env) >= sizeof(parent) || strlen(env) >= dirlen) {
		snprintf(err, len, "lock directory '%s' (HPSLOT_LOCK_DIR) is not an absolute path of at most %zu "
			 "characters", env, sizeof(parent) - 1);
		return -1;
	}
	/* without trailing slashes (one would make lstat follow a link) */
	snprintf(dir, dirlen, "%s", env);
	for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
		dir[n - 1] = 0;
	snprintf(parent, sizeof(parent), "%s", dir);
	char *slash = strrchr(parent, '/');
	if (slash && slash > parent) {
		*slash = 0;
		if (mkdir_0700(parent, err, len))
			return -1;
	}
	if (mkdir_0700(dir, err, len))
		return -1;
	if (lstat(dir, &st)) {
		snprintf(err, len, "lock directory %s: %s", dir, strerror(errno));
		return -1;
	}
	if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
		snprintf(err, len, "lock directory %s is %s: refusing to use it (it must be a real directory owned "
			 "by uid %u, mode 0700)", dir, S_ISLNK(st.st_mode) ? "a symbolic link" : "not a directory",
			 (unsigned)me);
		return -1;
	}
	if (st.st_uid != me) {
		snprintf(err, len, "lock directory %s is owned by uid %u, not by uid %u (this hpslot): refusing to "
			 "use it", dir, (unsigned)st.st_uid, (unsigned)me);
		return -1;
	}
	if (st.st_mode & 077) {
		snprintf(err, len, "lock directory %s has mode %04o: group and others must have no access (0700); "
			 "refusing to use it", dir, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &fst) || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
		snprintf(err, len, "lock directory %s: %s", dir, dfd < 0 ? strerror(errno) : "changed while it was checked");
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	return dfd;
}

/* Rewrite the lock file: the holder line (while held) and the pause line. */
static int lock_write(bool holder, char *err, size_t len)
{
	char buf[512];
	int n = 0;

	if (lock_fd < 0)
		return 0;
	if (holder && (n = hp_lock_holder_line(buf, sizeof(buf), (long)getpid(), lock_cmd, lock_since)) < 0)
		n = 0;
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s", lock_pause);
	if (pwrite(lock_fd, buf, (size_t)n, 0) != n || ftruncate(lock_fd, n)) {
		snprintf(err, len, "cannot write the lock file %s: %s", lock_path, strerror(errno ? errno : EIO));
		return -1;
	}
	return 0;
}

/* Who holds the lock, from the lock file, for a message. */
static void lock_holder(int fd, char *buf, size_t len)
{
	char text[1024];
	struct hp_lock_record r;
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);

	text[n > 0 ? n : 0] = 0;
	hp_lock_record_parse(text, &r);
	if (!r.holder_pid) {
		snprintf(buf, len, "a process that did not record itself in it");
		return;
	}
	char since[40] = "";
	if (r.holder_since) {
		char t[32];
		iso_time(r.holder_since, t, sizeof(t));
		snprintf(since, sizeof(since), ", since %s", t);
	}
	if (pid_alive(r.holder_pid))
		snprintf(buf, len, "pid %ld (cmd %s%s)", r.holder_pid, r.holder_cmd[0] ? r.holder_cmd : "unknown", since);
	else	/* e.g. vm-watchdog resuming a domain, after a killed hpslot */
		snprintf(buf, len, "a process that did not record itself in it (the last holder it names, pid %ld "
			 "cmd %s%s, is not running)", r.holder_pid, r.holder_cmd[0] ? r.holder_cmd : "unknown", since);
}

int hp_lock(struct hp_ctx *h, char *err, size_t len)
{
	const char *domain = hp_domain_name(h), *why;
	char name[HP_LOCK_NAME_MAX + 8];
	double wait;
	struct stat st;
	int dfd, fd;

	if (lock_depth) {
		lock_depth++;
		return 0;
	}
	if ((why = hp_lock_name_invalid(domain))) {
		snprintf(err, len, "domain name '%s' cannot name a lock file: %s (hpslot takes [A-Za-z0-9._+-], "
			 "not starting with '.')", domain, why);
		return -1;
	}
	if (hp_parse_lock_wait(getenv("HPSLOT_LOCK_WAIT"), &wait, err, len))
		return -1;
	char dir[512];
	if ((dfd = lock_dir_open(dir, sizeof(dir), err, len)) < 0)
		return -1;
	snprintf(name, sizeof(name), "%s.lock", domain);
	snprintf(lock_path, sizeof(lock_path), "%s/%s", strcmp(dir, "/") ? dir : "", name);
	fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);
	int open_errno = errno;
	close(dfd);
	if (fd < 0) {
		if (open_errno == ELOOP)
			snprintf(err, len, "lock file %s is a symbolic link: refusing to follow it", lock_path);
		else
			snprintf(err, len, "cannot open the lock file %s: %s", lock_path, strerror(open_errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != geteuid()) {
		snprintf(err, len, "lock file %s is not a regular file of uid %u with one link: refusing to use it",
			 lock_path, (unsigned)geteuid());
		close(fd);
		return -1;
	}
	for (double t0 = hp_mono();; hp_sleep(0.01)) {
		if (!flock(fd, LOCK_EX | LOCK_NB))
			break;
		if (errno != EWOULDBLOCK && errno != EINTR) {
			snprintf(err, len, "cannot lock %s: %s", lock_path, strerror(errno));
			close(fd);
			return -1;
		}
		if (hp_mono() - t0 >= wait) {
			char who[256];
			lock_holder(fd, who, sizeof(who));
			snprintf(err, len, "domain %s is locked by %s: its lock %s was not free within %g s "
				 "(HPSLOT_LOCK_WAIT)", domain, who, lock_path, wait);
			close(fd);
			return -1;
		}
	}
	/* ours now: a pause line in it is stale (hp_prepare deals with it); keep
	 * it until then, and record ourselves */
	char text[1024];
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	text[n > 0 ? n : 0] = 0;
	hp_lock_record_parse(text, &lock_found);
	lock_pause[0] = 0;
	if (lock_found.paused)
		snprintf(lock_pause, sizeof(lock_pause), "%s\n", lock_found.paused_line);
	lock_fd = fd;
	lock_depth = 1;
	lock_since = (long long)time(NULL);
	if (lock_write(true, err, len)) {
		flock(fd, LOCK_UN);
		close(fd);
		lock_fd = -1;
		lock_depth = 0;
		return -1;
	}
	return 0;
}

void hp_unlock(void)
{
	if (lock_depth > 0 && --lock_depth == 0 && lock_fd >= 0) {
		char err[256];
		/* only a pause line stays: a domain this process could not resume */
		if (lock_write(false, err, sizeof(err)))
			fprintf(stderr, "hpslot: %s\n", err);
		flock(lock_fd, LOCK_UN);
		close(lock_fd);
		lock_fd = -1;
	}
}

/* Just after taking the lock: a pause line in it was left by an hpslot
 * that stopped the domain and never resumed it (killed mid-pause, or its
 * cont failed). Resume the domain if QEMU is still stopped, then clear
 * the line. 0, or an exit code when the domain stays paused. */
int hp_lock_recover(struct hp_ctx *h, struct hp_out *o)
{
	struct hp_lock_record r = lock_found;
	char since[32], qst[64], err[512];
	bool running;

	memset(&lock_found, 0, sizeof(lock_found));
	if (!r.paused)
		return 0;
	iso_time(r.paused_since, since, sizeof(since));
	const char *st = hp_domain_state(h, &running);
	hp_qemu_running(h, qst, sizeof(qst));
	struct json_object *j = json_object_new_object();
	json_object_object_add(j, "record", json_object_new_string(r.paused_line));
	json_object_object_add(j, "pid", json_object_new_int64(r.paused_pid));
	json_object_object_add(j, "pid_alive", json_object_new_boolean(pid_alive(r.paused_pid)));
	json_object_object_add(j, "since", r.paused_since ? json_object_new_string(since) : NULL);
	json_object_object_add(j, "state", json_object_new_string(st));
	json_object_object_add(j, "qemu_status", json_object_new_string(qst));
	json_object_object_add(o->root, "stale_pause", j);
	if (strcmp(qst, "paused")) {
		/* QEMU runs (someone resumed it) or is in a state hpslot did not
		 * cause: nothing to undo */
		json_object_object_add(j, "resumed", json_object_new_boolean(false));
		hp_note(o, "cleared a stale pause record of hpslot pid %ld (since %s): the domain is %s (QEMU status "
			"%s), not resumed", r.paused_pid, since, st, qst);
		lock_pause[0] = 0;
		if (lock_write(true, err, sizeof(err)))
			fprintf(stderr, "hpslot: %s\n", err);
		return 0;
	}
	hp_signals_block(true);
	int rc = hp_vm_cont(h, err, sizeof(err));	/* clears the pause line */
	hp_signals_block(false);
	json_object_object_add(j, "resumed", json_object_new_boolean(!rc));
	if (rc) {
		hp_fail(o, "domain %s was left paused by hpslot pid %ld since %s and could not be resumed: %s",
			hp_domain_name(h), r.paused_pid, since, err);
		return HP_EXIT_FAILED;
	}
	/* libvirt learns of the RESUME from QEMU's event: wait for it (2 s) */
	for (double t0 = hp_mono(); hp_mono() - t0 < 2; hp_sleep(0.02)) {
		hp_domain_state(h, &running);
		if (running)
			break;
	}
	long long ago = r.paused_since ? (long long)time(NULL) - r.paused_since : -1;
	fprintf(stderr, "hpslot: resumed domain %s, left paused by hpslot pid %ld since %s (%lld s ago)\n",
		hp_domain_name(h), r.paused_pid, since, ago);
	hp_note(o, "resumed domain %s, left paused by hpslot pid %ld since %s (%lld s ago)", hp_domain_name(h),
		r.paused_pid, since, ago);
	return 0;
}

int hp_vm_stop(struct hp_ctx *h, char *err, size_t errlen)
{
	char st[64];

	if (lock_fd < 0 || !lock_depth) {
		snprintf(err, errlen, "internal error: stopping the domain without holding its lock");
		return -1;
	}
	/* record the pause first: if this process dies before its cont, the
	 * next hpslot (or vm-watchdog) knows who left the domain paused */
	char e[256];
	if (hp_lock_pause_line(lock_pause, sizeof(lock_pause), (long)getpid(), (long long)time(NULL)) < 0)
		snprintf(e, sizeof(e), "cannot format the pause record");
	else if (!lock_write(true, e, sizeof(e)))
		e[0] = 0;
	if (e[0]) {
		snprintf(err, errlen, "%s; not stopping the domain", e);
		lock_pause[0] = 0;
		lock_write(true, e, sizeof(e));
		return -1;
	}
	if (!hp_qmp(h, "stop", NULL, NULL, err, errlen))
		return 0;
	/* not stopped after all: nothing to record (if unsure, keep the line) */
	if (hp_qemu_running(h, st, sizeof(st))) {
		lock_pause[0] = 0;
		lock_write(true, e, sizeof(e));
	}
	return -1;
}

int hp_vm_cont(struct hp_ctx *h, char *err, size_t errlen)
{
	/* Resuming is the one thing that must not be skipped: retry a little. */
	for (int i = 0; i < 5; i++) {
		if (!hp_qmp(h, "cont", NULL, NULL, err, errlen)) {
			if (lock_pause[0]) {
				char e[256];
				lock_pause[0] = 0;
				if (lock_write(lock_depth > 0, e, sizeof(e)))
					fprintf(stderr, "hpslot: %s\n", e);
			}
			return 0;
		}
		hp_sleep(0.2);
	}
	fprintf(stderr, "hpslot: COULD NOT RESUME domain %s (%s): run `virsh resume %s`\n",
		hp_domain_name(h), err, hp_domain_name(h));
	return -1;
}

bool hp_qemu_running(struct hp_ctx *h, char *status, size_t len)
{
	struct json_object *r, *x;
	char err[256];
	bool running = false;

	snprintf(status, len, "unknown");
	if (hp_qmp(h, "query-status", NULL, &r, err, sizeof(err)))
		return false;
	if (json_object_object_get_ex(r, "status", &x))
		snprintf(status, len, "%s", json_object_get_string(x));
	if (json_object_object_get_ex(r, "running", &x))
		running = json_object_get_boolean(x);
	json_object_put(r);
	return running;
}
