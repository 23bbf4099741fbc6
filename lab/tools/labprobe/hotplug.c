/* Hot-removal measurement, the same on every kernel variant.
 *
 *   labprobe arm --dir D --slots N,... [--fio N,...] [--fio-runtime S]
 *                [--hung-task-timeout S]
 *   labprobe collect --dir D [--expect-gone N,...] [--expect-kept N,... [--observe S] [--aer]]
 *                    [--timeout S] [--fio-timeout S]
 *   labprobe drives --expect N=SERIAL,... [--timeout S] [--verify-mib M]
 *
 * arm snapshots what each slot holds, starts kprobe events in a tracefs
 * instance of its own (clock: mono, i.e. CLOCK_MONOTONIC, printed in us)
 * and, optionally, a verifying fio job on each named drive, supervised by a
 * background process that records when each job ends. The host then acts
 * (hpslot). collect waits until the named slots are empty, reads the
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
 * (a test hook).
 * drives waits for drives to (re)appear with the expected serials and
 * optionally write-verifies each with fio. */
#include "labprobe.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define INSTANCE TRACEFS "/instances/labprobe"
/* seconds a kept slot's fio may show no progress after the observation
 * window before it counts as stalled */
#define STALL_GRACE_S 10.0
#define MAXS 256

static const struct lp_probe probes[] = {
	{ "lp_isr", "pciehp_isr irq=%di:s32", "p", true },
	{ "lp_change", "pciehp_handle_presence_or_link_change events=%si:x32", "p", true },
	{ "lp_unconf", "pciehp_unconfigure_device presence=%si:u8", "p", true },
	{ "lp_disc", "pci_dev_set_disconnected", "p", false },
	{ "lp_nvrm", "nvme_remove", "p", true },
	{ "lp_nvrm_ret", "nvme_remove", "r", true },
	{ "lp_del", "device_del name=+0(+0(%di)):string", "p", true },
	{ "lp_add", "device_add name=+0(+0(%di)):string", "p", true },
	{ "lp_conf", "pciehp_configure_device", "p", false },
	/* AER recovery (port-wide events; kernels without AER lack them) */
	{ "lp_aer", "aer_isr irq=%di:s32", "p", false },
	{ "lp_rec", "pcie_do_recovery state=%si:u32", "p", false },
	{ "lp_rec_ret", "pcie_do_recovery ret=$retval:u32", "r", false },
	{ "lp_reset", "pciehp_reset_slot probe=%si:s32", "p", false },
	/* the device whose driver a thread releases: attributes nvme_remove
	 * when one IRQ thread tears down a whole JBOF */
	{ "lp_unbind", "device_release_driver_internal name=+0(+0(%di)):string", "p", false },
};
#define NPROBES (sizeof(probes) / sizeof(probes[0]))
/* and breakdown.c's, all optional, after them */
#define NALL (NPROBES + breakdown_nprobes)

static const struct lp_probe *probe_at(size_t i)
{
	return i < NPROBES ? &probes[i] : &breakdown_probes[i - NPROBES];
}

static int writef(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int writef(const char *path, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int fd, ret = 0;
	ssize_t len;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	len = write(fd, buf, strlen(buf));
	if (len < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static void tracefs_mount(void)
{
	if (access(TRACEFS "/kprobe_events", F_OK))
		mount("nodev", TRACEFS, "tracefs", 0, NULL);
}

static void probes_remove(void)
{
	char path[256];

	for (size_t i = 0; i < NALL; i++) {
		snprintf(path, sizeof(path), INSTANCE "/events/labprobe/%s/enable", probe_at(i)->name);
		writef(path, "0");
	}
	rmdir(INSTANCE);
	for (size_t i = 0; i < NALL; i++)
		writef(TRACEFS "/kprobe_events", "-:labprobe/%s\n", probe_at(i)->name);
}

/* ---- slot snapshot ---- */

struct slot {
	char name[16];
	int bus;
	char port[32];
	int irqs[8];
	int nirqs;
	/* the hotplug port above the slot's port (a JBOF's root port), its
	 * slot name and interrupts; "" and 0 when there is none */
	char above[32];
	char above_slot[16];
	int above_irqs[8];
	int nabove;
	char ctrls[4][32];
	int nctrls;
	char nss[8][32];
	int nns;
	/* collected: kprobe times (t) and pci_hotplug tracepoint times (tp) */
	double t[16];
	double tp[8];
	bool fio;
	int fio_rc;
	double fio_end;
	bool gone;
};

/* labprobe drives' fio: its JSON report and its log (errors by file) */
#define VERIFY_REPORT "/run/labprobe-verify.json"
#define VERIFY_LOG "/run/labprobe-verify.log"

/* fio_rc of a job that ended but whose error fio never reported (killed) */
#define FIO_UNREPORTED (-2)

enum { T_ISR, T_HANDLED, T_DISC, T_UNBIND, T_UNBOUND, T_PCIDEL, T_BLKDEL, T_N };
/* beyond the reported phases: pciehp_unconfigure_device in an IRQ thread */
#define T_UNCONF 8

/* Kill an armed fio group and wait until it is gone: a killed fio's direct
 * writes in flight still land while it exits, and would overwrite what the
 * next step writes to the same drive (seen: a write+verify right after an
 * aer-recovery collect failed while a forked fio job wrote on). Waits up to 10 s. */
static void kill_fio_group(pid_t pgid)
{
	kill(-pgid, SIGKILL);
	for (int i = 0; i < 200 && kill(-pgid, 0) == 0; i++)
		usleep(50000);
}

/* What fio said about NS when its write+verify failed: its lines that
 * name an error on /dev/NS ("fio: io_u error on file ...", "verify: bad
 * ...", "crc32c: verify failed at file ..."), joined, so a finding tells
 * an I/O error from a data mismatch and where. */
static void fio_error_lines(const char *ns, char *buf, size_t len)
{
	char dev[48], *line = NULL, *at;
	size_t cap = 0, used = 0;
	FILE *f = fopen(VERIFY_LOG, "r");

	snprintf(dev, sizeof(dev), "/dev/%.31s", ns);
	while (f && getline(&line, &cap, f) > 0 && used + 2 < len) {
		line[strcspn(line, "\n")] = 0;
		at = strstr(line, dev);
		/* nvme1n1 is not nvme1n10 */
		if (!at || (at[strlen(dev)] >= '0' && at[strlen(dev)] <= '9'))
			continue;
		if (!strstr(line, "fio: ") && !strstr(line, "verify: bad") && !strstr(line, "verify failed"))
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " | " : "", line);
	}
	free(line);
	if (f)
		fclose(f);
}

/* The pci_hotplug tracepoints of the lab's patch series (patched kernel
 * only), and the kprobe time each is compared with. */
enum { TP_EVENT, TP_DISABLE_BEGIN, TP_DISCONNECTED, TP_DISABLE_END, TP_N };
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

static void snapshot(struct slot *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	scopy(s->name, sizeof(s->name), name);
	s->bus = slot_bus(name);
	if (s->bus >= 0 && slot_port(s->bus, s->port, sizeof(s->port))) {
		s->nirqs = port_irqs(s->port, s->irqs, 8);
		if (port_hotplug_parent(s->port, s->above, sizeof(s->above))) {
			s->nabove = port_irqs(s->above, s->above_irqs, 8);
			bus_slot_name(port_secondary_bus(s->above), s->above_slot, sizeof(s->above_slot));
		}
	}
	if (s->bus >= 0)
		s->nctrls = bus_ctrls(s->bus, s->ctrls, 4);
	for (int c = 0; c < s->nctrls; c++)
		s->nns += ctrl_namespaces(s->ctrls[c], s->nss + s->nns, 8 - s->nns);
	for (int i = 0; i < 16; i++)
		s->t[i] = -1;
	for (int i = 0; i < 8; i++)
		s->tp[i] = -1;
}

static struct json_object *slot_json(const struct slot *s)
{
	struct json_object *o = json_object_new_object(), *a;

	json_object_object_add(o, "slot", json_object_new_string(s->name));
	json_object_object_add(o, "bus", json_object_new_int(s->bus));
	json_object_object_add(o, "port", json_object_new_string(s->port));
	a = json_object_new_array();
	for (int i = 0; i < s->nirqs; i++)
		json_object_array_add(a, json_object_new_int(s->irqs[i]));
	json_object_object_add(o, "irqs", a);
	if (s->above[0]) {
		json_object_object_add(o, "above_port", json_object_new_string(s->above));
		json_object_object_add(o, "above_slot", json_object_new_string(s->above_slot));
		a = json_object_new_array();
		for (int i = 0; i < s->nabove; i++)
			json_object_array_add(a, json_object_new_int(s->above_irqs[i]));
		json_object_object_add(o, "above_irqs", a);
	}
	a = json_object_new_array();
	for (int i = 0; i < s->nctrls; i++)
		json_object_array_add(a, json_object_new_string(s->ctrls[i]));
	json_object_object_add(o, "ctrls", a);
	a = json_object_new_array();
	for (int i = 0; i < s->nns; i++)
		json_object_array_add(a, json_object_new_string(s->nss[i]));
	json_object_object_add(o, "namespaces", a);
	json_object_object_add(o, "fio", json_object_new_boolean(s->fio && s->nns));
	return o;
}

static int slot_from_json(struct json_object *o, struct slot *s)
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

/* ---- fio supervision ---- */

static unsigned long long ns_io(const char *ns);

/* One fio process runs a job per drive: Debian's fio links librados,
 * librbd and glusterfs, and loading them costs a second or more of CPU
 * per process under TCG, so a process per drive made arming 16 drives
 * take half a minute. GLOBALS apply to every job; each job is named
 * after its slot. */
static int fio_argv(char **argv, int max, char *const *globals, struct slot *slots, int n,
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
static void fio_job_errors(const char *report, struct slot *slots, int n, int *err)
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
static void supervise(const char *dir, struct slot *slots, int n, int runtime)
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

static unsigned long long ns_io(const char *ns)
{
	char line[256];
	unsigned long long r = 0, w = 0, x;

	if (read_linef(line, sizeof(line), "/sys/block/%s/stat", ns) < 0)
		return 0;
	sscanf(line, "%llu %llu %llu %llu %llu", &r, &x, &x, &x, &w);
	return r + w;
}

/* ---- arm ---- */

/* D, created if need be, without the fio files of an earlier arm */
static int prepare_dir(const char *dir)
{
	int ret = mkdir_p(dir, 0755);
	struct dirent *e;
	DIR *d;

	if (ret)
		return ret;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if ((!strncmp(e->d_name, "fio-", 4) || !strncmp(e->d_name, "fio.", 4)) &&
		    unlinkat(dirfd(d), e->d_name, 0) && errno != ENOENT) {
			ret = -errno;
			break;
		}
	closedir(d);
	return ret;
}

int cmd_arm(int argc, char **argv, struct json_object *out)
{
	enum { OPT_DIR = OPT_FIRST, OPT_SLOTS, OPT_FIO, OPT_FIO_RUNTIME, OPT_HUNG };
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, OPT_DIR },
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "fio", required_argument, NULL, OPT_FIO },
		{ "fio-runtime", required_argument, NULL, OPT_FIO_RUNTIME },
		{ "hung-task-timeout", required_argument, NULL, OPT_HUNG },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = NULL;
	char *slot_names[MAXS], *fio_names[MAXS];
	int nslots = 0, nfio = 0, runtime = 300, hung = 0, ret, opt;
	static struct slot slots[MAXS];
	struct json_object *state, *arr, *pr;
	struct checks c;
	char path[300];
	pid_t fio_pgid = 0;

	/* every argument is checked before anything is touched */
	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_DIR:
			dir = optarg;
			if (check_path_opt("--dir", dir))
				return 2;
			break;
		case OPT_SLOTS:
			if ((nslots = parse_slots("--slots", strdup(optarg), slot_names, MAXS)) < 0)
				return 2;
			break;
		case OPT_FIO:
			if ((nfio = parse_slots("--fio", strdup(optarg), fio_names, MAXS)) < 0)
				return 2;
			break;
		case OPT_FIO_RUNTIME:
			if (parse_int_opt("--fio-runtime", optarg, 1, TIMEOUT_MAX, &runtime))
				return 2;
			break;
		case OPT_HUNG:
			if (parse_int_opt("--hung-task-timeout", optarg, 0, TIMEOUT_MAX, &hung))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (!dir || !nslots) {
		fprintf(stderr, "labprobe arm: --dir and --slots are required\n");
		return 2;
	}
	check_init(&c);
	ret = prepare_dir(dir);
	if (ret) {
		fprintf(stderr, "labprobe arm: cannot prepare %s: %s\n", dir, strerror(-ret));
		return 2;
	}
	state = json_object_new_object();

	arr = json_object_new_array();
	for (int i = 0; i < nslots; i++) {
		snapshot(&slots[i], slot_names[i]);
		for (int j = 0; j < nfio; j++)
			if (!strcmp(fio_names[j], slot_names[i]))
				slots[i].fio = true;
		check(&c, slots[i].bus >= 0 && slots[i].nirqs > 0, "slot-known",
		      "slot %s: bus %d, port %s, %d irq(s)", slots[i].name, slots[i].bus,
		      slots[i].port, slots[i].nirqs);
		if (slots[i].fio)
			check(&c, slots[i].nns > 0, "fio-target", "slot %s: namespace %s", slots[i].name,
			      slots[i].nns ? slots[i].nss[0] : "none");
		json_object_array_add(arr, slot_json(&slots[i]));
	}
	json_object_object_add(state, "slots", arr);
	json_object_object_add(state, "kmsg_seq", json_object_new_uint64(kmsg_last_seq()));
	/* collect judges the log from here: arm nothing without one */
	check(&c, !kmsg_error(), "kmsg-readable", "%s", kmsg_error() ? kmsg_error() : "kernel log read");
	if (c.failed) {
		json_object_object_add(out, "state", state);
		json_object_object_add(out, "checks", c.list);
		return 1;
	}

	if (hung > 0) {
		char was[32];

		/* collect puts the old value back: later scenarios keep the
		 * kernel's own threshold */
		if (read_line("/proc/sys/kernel/hung_task_timeout_secs", was, sizeof(was)) == 0)
			json_object_object_add(state, "hung_task_was", json_object_new_string(was));
		snprintf(path, sizeof(path), "%d", hung);
		write_str("/proc/sys/kernel/hung_task_timeout_secs", path);
	}

	/* tracing: a fresh instance with our kprobes only */
	tracefs_mount();
	trace_pin_cmdline();
	probes_remove();
	pr = json_object_new_object();
	if (mkdir(INSTANCE, 0755) && errno != EEXIST)
		check(&c, false, "tracefs-instance", "mkdir %s: %s", INSTANCE, strerror(errno));
	writef(INSTANCE "/trace_clock", "mono");
	writef(INSTANCE "/buffer_size_kb", "8192");
	writef(INSTANCE "/trace", "\n");
	for (size_t i = 0; i < NALL; i++) {
		const struct lp_probe *p = probe_at(i);
		int ret = writef(TRACEFS "/kprobe_events", "%s:labprobe/%s %s\n", p->type, p->name, p->def);

		if (!ret) {
			snprintf(path, sizeof(path), INSTANCE "/events/labprobe/%s/enable", p->name);
			ret = writef(path, "1");
		}
		json_object_object_add(pr, p->name, json_object_new_string(ret ? strerror(-ret) : "ok"));
		if (p->required)
			check(&c, ret == 0, "kprobe", "%s on %s: %s", p->name, p->def,
			      ret ? strerror(-ret) : "ok");
	}
	/* the guest's context switches from the first pciehp interrupt on */
	json_object_object_add(state, "cpu_window", window_arm(INSTANCE));
	/* the series' own tracepoints, where the kernel has them */
	json_object_object_add(state, "tracepoints", json_object_new_boolean(
		writef(INSTANCE "/events/pci_hotplug/enable", "1") == 0));
	writef(INSTANCE "/tracing_on", "1");
	json_object_object_add(state, "probes", json_object_get(pr));
	{
		/* the CPU time of the slots' pciehp IRQ threads so far */
		int irqs[MAXS * 16], nirqs = 0;

		for (int i = 0; i < nslots; i++) {
			for (int j = 0; j < slots[i].nirqs; j++)
				irqs[nirqs++] = slots[i].irqs[j];
			for (int j = 0; j < slots[i].nabove; j++)
				irqs[nirqs++] = slots[i].above_irqs[j];
		}
		json_object_object_add(state, "breakdown", breakdown_arm(irqs, nirqs));
	}
	json_object_object_add(state, "armed_at", json_object_new_double(now_mono()));
	snprintf(path, sizeof(path), "%s/state.json", dir);
	check(&c, json_object_to_file_ext(path, state, JSON_C_TO_STRING_PLAIN) == 0, "state-saved",
	      "%s", path);

	if (nfio) {
		unsigned long long before[MAXS];
		pid_t pid;

		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			setsid();
			if (fork() == 0) {
				int fd = open("/dev/null", O_RDWR);

				dup2(fd, 0);
				dup2(fd, 1);
				dup2(fd, 2);
				supervise(dir, slots, nslots, runtime);
			}
			_exit(0);
		}
		waitpid(pid, NULL, 0);
		/* the supervisor and its fio jobs form process group `pid` */
		json_object_object_add(state, "fio_pgid", json_object_new_int(pid));
		fio_pgid = pid;
		for (int i = 0; i < nslots; i++)
			before[i] = slots[i].fio ? ns_io(slots[i].nss[0]) : 0;
		for (int tries = 0; tries < 600; tries++) {	/* up to 60 s for I/O to flow */
			int flowing = 0, want = 0;

			usleep(100000);
			for (int i = 0; i < nslots; i++) {
				if (!slots[i].fio || !slots[i].nns)
					continue;
				want++;
				flowing += ns_io(slots[i].nss[0]) > before[i] + 16;
			}
			if (flowing == want || tries == 599) {
				check(&c, flowing == want, "fio-running", "I/O flowing on %d of %d drives",
				      flowing, want);
				break;
			}
		}
	}
	snprintf(path, sizeof(path), "%s/state.json", dir);
	json_object_to_file_ext(path, state, JSON_C_TO_STRING_PLAIN);
	if (c.failed) {
		/* all or nothing: a failed arm leaves no fio and no probes behind */
		if (fio_pgid > 0)
			kill(-fio_pgid, SIGKILL);
		probes_remove();
	}
	json_object_object_add(out, "state", state);
	json_object_object_add(out, "checks", c.list);
	json_object_put(pr);
	return c.failed ? 1 : 0;
}

/* ---- collect ---- */

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

/* ---- drives: (re)appeared with the expected serial, optionally verified ---- */

/* A finding for a drive that did not come back: why, and the kernel's
 * last lines on its PCI function and on its controller. */
static struct json_object *drive_absent_log(const char *slot, int bus, const char *why)
{
	struct json_object *f = json_object_new_object(), *ctx, *more;
	char needle[40], ctrls[4][32];

	snprintf(needle, sizeof(needle), "0000:%02x:00.0", bus);
	ctx = kmsg_lines(0, needle, 6);
	if (bus >= 0 && bus_ctrls(bus, ctrls, 4) == 1) {
		snprintf(needle, sizeof(needle), " %s:", ctrls[0]);
		more = kmsg_lines(0, needle, 8);
		for (size_t i = 0; i < json_object_array_length(more); i++)
			json_object_array_add(ctx, json_object_get(json_object_array_get_idx(more, i)));
		json_object_put(more);
	}
	json_object_object_add(f, "kind", json_object_new_string("drive-absent"));
	json_object_object_add(f, "line", json_object_new_string(why));
	json_object_object_add(f, "slot", json_object_new_string(slot));
	json_object_object_add(f, "context", ctx);
	return f;
}

/* Why slot on `bus` does not hold a drive with `serial` and a usable
 * namespace: which of controller, serial, namespace or device node is
 * missing, with the controller's state, so that a lost namespace scan
 * reads differently from a drive that never enumerated. */
static void drive_absent_why(int bus, const char *serial, char *why, size_t len)
{
	char ctrls[4][32], nss[8][32], have[64] = "", state[32] = "?";
	int nc = bus >= 0 ? bus_ctrls(bus, ctrls, 4) : 0;

	if (bus < 0) {
		snprintf(why, len, "no hotplug port for the slot");
		return;
	}
	if (nc == 0) {
		snprintf(why, len, "no NVMe controller on bus %02x%s", bus,
			 bus_has_device(bus) ? " (a PCI function is there)" : "");
		return;
	}
	if (nc > 1) {
		snprintf(why, len, "%d NVMe controllers on bus %02x", nc, bus);
		return;
	}
	read_linef(state, sizeof(state), "/sys/class/nvme/%s/state", ctrls[0]);
	if (!ctrl_serial(ctrls[0], have, sizeof(have)) || strcmp(have, serial)) {
		snprintf(why, len, "controller %s (state %s) has serial '%s'", ctrls[0], state, have);
		return;
	}
	if (ctrl_namespaces(ctrls[0], nss, 8) == 0)
		snprintf(why, len, "controller %s (state %s, serial %s) has no namespace",
			 ctrls[0], state, have);
	else
		snprintf(why, len, "namespace %s of controller %s (state %s) has no /dev node",
			 nss[0], ctrls[0], state);
}

int cmd_drives(int argc, char **argv, struct json_object *out)
{
	enum { OPT_EXPECT = OPT_FIRST, OPT_TIMEOUT, OPT_VERIFY_MIB };
	static const struct option opts[] = {
		{ "expect", required_argument, NULL, OPT_EXPECT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "verify-mib", required_argument, NULL, OPT_VERIFY_MIB },
		{ NULL, 0, NULL, 0 },
	};
	char *want[MAXS];
	const char *serials[MAXS];
	int nwant = 0, verify_mib = 0, opt;
	double timeout = 60, start = now_mono();
	struct checks c;
	struct json_object *arr = json_object_new_array();
	char nsname[MAXS][32];
	struct json_object *absent = json_object_new_array();

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_EXPECT:
			nwant = parse_slot_values("--expect", strdup(optarg), want, serials, MAXS, false);
			if (nwant < 0)
				return 2;
			break;
		case OPT_TIMEOUT:
			if (parse_double_opt("--timeout", optarg, 0, TIMEOUT_MAX, &timeout))
				return 2;
			break;
		case OPT_VERIFY_MIB:
			if (parse_int_opt("--verify-mib", optarg, 0, 1 << 20, &verify_mib))
				return 2;
			break;
		default:
			return 2;
		}
	}
	/* an empty list would pass with nothing checked (a re-add that
	 * reported no drive): name the mistake instead */
	if (nwant <= 0) {
		fprintf(stderr, "labprobe drives: --expect needs at least one SLOT=SERIAL\n");
		return 2;
	}
	check_init(&c);
	for (int w = 0; w < nwant; w++) {
		const char *want_serial = serials[w];
		char serial[64] = "", ctrls[4][32], nss[8][32];
		double t = -1;
		int bus = -1, nc = 0;

		nsname[w][0] = '\0';
		for (;;) {
			bus = slot_bus(want[w]);
			nc = bus >= 0 ? bus_ctrls(bus, ctrls, 4) : 0;
			if (nc == 1 && ctrl_serial(ctrls[0], serial, sizeof(serial)) &&
			    !strcmp(serial, want_serial) && ctrl_namespaces(ctrls[0], nss, 8) > 0 &&
			    path_exists("/dev/%s", nss[0])) {
				t = now_mono() - start;
				scopy(nsname[w], 32, nss[0]);
				break;
			}
			if (now_mono() - start > timeout)
				break;
			usleep(50000);
		}
		if (t >= 0) {
			check(&c, true, "drive-present", "slot %s: %s (expected serial %s)", want[w],
			      nss[0], want_serial);
		} else {
			char why[200];

			drive_absent_why(bus, want_serial, why, sizeof(why));
			check(&c, false, "drive-present", "slot %s: %s after %.0f s (expected serial %s)",
			      want[w], why, timeout, want_serial);
			json_object_array_add(absent, drive_absent_log(want[w], bus, why));
		}
		{
			struct json_object *o = json_object_new_object();

			json_object_object_add(o, "slot", json_object_new_string(want[w]));
			json_object_object_add(o, "serial", json_object_new_string(serial));
			json_object_object_add(o, "namespace", json_object_new_string(nsname[w]));
			json_object_object_add(o, "present_after_s", t >= 0 ? json_object_new_double(t) : NULL);
			json_object_array_add(arr, o);
		}
	}
	if (verify_mib > 0) {
		static struct slot jobs[MAXS];
		static char names[MAXS][48], files[MAXS][64];
		char *argv[16 + 2 * MAXS], size[32];
		char *globals[] = { "--thread", "--ioengine=libaio", "--direct=1", "--rw=write", "--bs=64k",
				    "--iodepth=4", size, "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
				    "--output-format=json", "--output=" VERIFY_REPORT, NULL };
		int err[MAXS];
		pid_t pid;

		snprintf(size, sizeof(size), "--size=%dM", verify_mib);
		for (int w = 0; w < nwant; w++) {
			memset(&jobs[w], 0, sizeof(jobs[w]));
			scopy(jobs[w].name, sizeof(jobs[w].name), want[w]);
			scopy(jobs[w].nss[0], 32, nsname[w]);
			jobs[w].nns = nsname[w][0] != '\0';
			jobs[w].fio = jobs[w].nns;
		}
		fio_argv(argv, (int)(sizeof(argv) / sizeof(argv[0])), globals, jobs, nwant, names, files);
		unlink(VERIFY_REPORT);
		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			int fd = open(VERIFY_LOG, O_WRONLY | O_CREAT | O_TRUNC, 0644);

			dup2(fd, 1);
			dup2(fd, 2);
			execvp("fio", argv);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
		fio_job_errors(VERIFY_REPORT, jobs, nwant, err);
		for (int w = 0; w < nwant; w++) {
			char why[400] = "";
			bool ok = err[w] == 0;

			if (!jobs[w].fio)
				continue;
			if (!ok)
				fio_error_lines(nsname[w], why, sizeof(why));
			check(&c, ok, "fio-verify", "slot %s: write+verify of %d MiB on %s %s%s%s%s%s", want[w],
			      verify_mib, nsname[w], ok ? "passed" : "failed",
			      err[w] > 0 ? ": " : "", err[w] > 0 ? strerror(err[w]) : err[w] < 0 ?
			      " (fio reported nothing on it)" : "", why[0] ? ": " : "", why);
		}
	}
	json_object_object_add(out, "drives", arr);
	json_object_object_add(out, "findings", absent);
	json_object_object_add(out, "checks", c.list);
	return c.failed ? 1 : 0;
}
