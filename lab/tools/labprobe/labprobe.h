/* labprobe: the lab's guest-side checker and measurer. Every subcommand
 * prints one JSON object on stdout and exits 0 only when its checks held. */
#ifndef LABPROBE_H
#define LABPROBE_H

#include <getopt.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* args.c: command-line values. Each returns -1 after saying on stderr what
 * is wrong with the option (the command then exits 2, before acting). */
extern const char *labprobe_cmd;	/* the subcommand, for messages */
void arg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A command's options: getopt_long over its argv (argv[0] the command's
 * name, as main() and the start/stop dispatchers pass it), read in order.
 * Long options only, each spelled out in full (no abbreviations), with
 * their vals from OPT_FIRST up. Returns the next option's val (optarg its
 * value); 1 with optarg for an argument that is no option when positional
 * (else that is an error); -1 after the last; '?' after saying what is
 * wrong: an unknown option, a missing value or one given to an option that
 * takes none, an unexpected argument (the command then exits 2). */
#define OPT_FIRST 256
int next_opt(int argc, char **argv, const struct option *opts, bool positional);
int parse_long_opt(const char *opt, const char *s, long min, long max, long *out);
int parse_int_opt(const char *opt, const char *s, int min, int max, int *out);
int parse_double_opt(const char *opt, const char *s, double min, double max, double *out);
/* A decimal integer from min to max at the start of s (no blank before
 * it), for numbers the kernel wrote (sysfs, /proc, the trace): quiet,
 * true if there is one; *end after it, or with end NULL nothing may follow */
bool scan_long(const char *s, char **end, long min, long max, long *out);
/* "a,b,..." split in place into at most max items: count, -1 if more */
int parse_list(const char *opt, char *arg, char **items, int max);
/* a physical slot number, 0..8191 */
int check_slot(const char *opt, const char *slot);
/* a list of slot numbers; of SLOT=VALUE entries (values point into arg) */
int parse_slots(const char *opt, char *arg, char **items, int max);
int parse_slot_values(const char *opt, char *arg, char **items, const char **values, int max,
		      bool value_optional);
/* an absolute path of [A-Za-z0-9/._+-], no "..", at most DIR_ARG_MAX long */
#define DIR_ARG_MAX 200
int check_path_opt(const char *opt, const char *s);
#define TIMEOUT_MAX 86400	/* seconds: any wait an option asks for */

/* sysfs.c */
int read_line(const char *path, char *buf, size_t len);
int read_linef(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
bool path_exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int write_str(const char *path, const char *val);
void scopy(char *dst, size_t len, const char *src);	/* truncating copy */
int mkdir_p(const char *path, mode_t mode);	/* mkdir -p; 0 or -errno */
void sleep_s(double s);	/* sleeps s seconds (s <= 0: not at all) */
/* last path component of the symlink named by fmt; "" and false if none */
bool link_base(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
double now_mono(void);	/* CLOCK_MONOTONIC in seconds */
/* milliseconds as a JSON number to the microsecond, printed so */
struct json_object *ms3(double ms);
/* env's value when set and not empty (a test hook), else dflt */
const char *hook(const char *env, const char *dflt);
/* this boot's id (LABPROBE_BOOT_ID=FILE in tests); "unknown" if unreadable */
void boot_id(char *buf, size_t len);
/* the first len bytes of a PCI function's config space (sysfs: reading it
 * resumes a device in D3cold); bytes read or -errno */
ssize_t pci_config_read(const char *dev, void *buf, size_t len);
/* offset of capability id in the cfg bytes read (standard list, or
 * extended from 0x100); 0 if absent */
int pci_find_cap(const uint8_t *cfg, size_t len, int id);
int pci_find_ext_cap(const uint8_t *cfg, size_t len, int id);

/* slots.c: what the guest sees in a hotplug slot */
int slot_bus(const char *slot);
bool slot_port(int bus, char *port, size_t len);
bool port_hotplug_parent(const char *port, char *parent, size_t len);
bool bus_slot_name(int bus, char *name, size_t len);
int port_secondary_bus(const char *port);
int port_irqs(const char *port, int *irqs, int max);
int bus_ctrls(int bus, char ctrls[][32], int max);
int ctrl_namespaces(const char *ctrl, char nss[][32], int max);
bool ctrl_serial(const char *ctrl, char *serial, size_t len);
bool bus_has_device(int bus);

/* findings.c: kernel log lines that fail a scenario. A log that cannot
 * be read is a finding of kind "kmsg-error", never a clean log. */
struct json_object *findings_scan(unsigned long long since_seq, int context);
/* findings_scan after since when since_given, with its kernel-log-clean check */
struct checks;
struct json_object *findings_check(struct checks *c, bool since_given, long since);
/* the findings of the records after since_seq (a log window's close);
 * adds to out unscanned_records, those of them in none of the ranges
 * ((from, to] each: what the window's steps scanned), and last_seq */
struct json_object *findings_scan_window(unsigned long long since_seq, const unsigned long long (*ranges)[2],
					 int nranges, int context, struct json_object *out);
/* logwindow.c: findings_scan() calls log_window_before_scan() (a canary
 * due now is written) and, after a readable scan, log_window_scanned() */
void log_window_before_scan(void);
void log_window_scanned(unsigned long long from, unsigned long long to);
int cmd_log_window(int argc, char **argv, struct json_object *out);
unsigned long long kmsg_last_seq(void);
struct json_object *kmsg_last_seq_json(void);	/* null when the log cannot be read */
/* How reading the log went in this run: "error" (the log could not be
 * opened or read) and "kmsg_overrun" (records lost) into out, once the
 * log was read; true on an error. */
bool kmsg_report(struct json_object *out);
const char *kmsg_error(void);	/* NULL, or why the log could not be read */
/* The last `max` kernel log lines after seq `since` that contain `needle`
 * (NULL: all), as "[ts] message". */
struct json_object *kmsg_lines(unsigned long long since, const char *needle, int max);

#define TRACEFS "/sys/kernel/tracing"

/* kprobes.c: counting kprobes of one group (= tracefs instance) */
struct kprobe_def {
	const char *name, *def;	/* event name; kprobe_events definition after it */
};
int kprobes_arm(const char *group, const struct kprobe_def *p, size_t n, struct json_object *out);
void kprobes_remove(const char *group, const struct kprobe_def *p, size_t n);
/* keeps task-name recording on from the first arm: see kprobes.c */
void trace_pin_cmdline(void);
void kprobes_hits(const char *group, const struct kprobe_def *p, size_t n, long long *hits);
bool kprobes_collect(const char *group, const struct kprobe_def *p, size_t n, long long *hits,
		     struct json_object *out);

/* A kprobe event of the group "labprobe" that arm places in its trace
 * instance (trace.c's table). */
struct lp_probe {
	const char *name;	/* event name in group labprobe */
	const char *def;	/* kprobe_events definition after "TYPE:labprobe/name " */
	const char *type;	/* "p"; "r", or "rN": a kretprobe N calls may be in at once */
	bool required;		/* arm fails if it cannot be placed */
};

/* breakdown.c: where each yanked slot's teardown spent its time (its
 * header lists the fields). arm places breakdown_probes (all optional)
 * with its own and keeps breakdown_arm()'s CPU times of the pciehp IRQ
 * threads of `irqs` in its state; collect calls breakdown_begin() with the
 * state's probe results, then for every trace line breakdown_event()
 * (true: the line was the breakdown's own) and, for nvme_remove's entry
 * and return, breakdown_unbind() with the slot it unbinds (-1 unknown);
 * breakdown_read_profile() before the probes are removed; then
 * breakdown_collect(), which sets objs[i] (slot i's "breakdown", NULL for
 * a slot not yanked) and the top-level fields in out. */
extern const struct lp_probe breakdown_probes[];
extern const size_t breakdown_nprobes;
struct bd_slot {
	const int *irqs;	/* its port's interrupts */
	int nirqs;
	const int *above;	/* the hotplug port's above it (a JBOF's root port) */
	int nabove;
	bool yanked;		/* --expect-gone */
};
struct json_object *breakdown_arm(const int *irqs, int n);
void breakdown_begin(struct json_object *probes);
bool breakdown_event(int pid, int irq_thread, double ts, const char *event);
void breakdown_unbind(int pid, int irq_thread, double ts, int slot, bool ret);
void breakdown_read_profile(const char *path);
void breakdown_collect(struct json_object *arm, const struct bd_slot *s, int n, struct json_object **objs,
		       struct json_object *out);

/* window.c: what the guest's CPUs did from the first pciehp interrupt to
 * the last drive gone (its header lists the fields). arm calls
 * window_arm() after placing lp_isr and keeps its object in its state;
 * collect calls window_begin(), window_event() for every trace line (true:
 * a sched_switch line, its own), window_lost() for a line saying the
 * trace lost events, then window_collect() with the window; NULL with
 * *why set when there is nothing trustworthy to report. */
struct json_object *window_arm(const char *instance);
void window_begin(void);
bool window_event(int cpu, double ts, const char *event, const char *args);
void window_lost(void);
struct json_object *window_collect(struct json_object *armed, double t0, double t1, const char **why);

/* The hot-removal measurement: the commands arm (arm.c), collect
 * (collect.c) and drives (drives.c), their fio jobs (fio.c) and arm's
 * kprobes (trace.c). */
#define MAXS 256	/* slots (and drives) one command takes at most */
/* one slot: what arm saw in it (its state.json), what collect adds */
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

/* trace.c: arm's kprobes, in a tracefs instance of their own */
#define INSTANCE TRACEFS "/instances/labprobe"
extern const size_t lp_nprobes;	/* arm's own probes, probe_at()'s first */
/* and breakdown.c's, all optional, after them */
#define NALL (lp_nprobes + breakdown_nprobes)
/* probe i (< NALL) that arm places: its own, then breakdown.c's */
const struct lp_probe *probe_at(size_t i);
/* appends the formatted text to path (kprobe_events must be appended to); 0 or -errno */
int writef(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* mounts tracefs at TRACEFS unless it is mounted */
void tracefs_mount(void);
/* disables and deletes the NALL probes and removes INSTANCE */
void probes_remove(void);

/* fio.c: one fio process, a job per drive (named after its slot) */
/* kills arm's fio process group and waits (up to 10 s) until it is gone */
void kill_fio_group(pid_t pgid);
/* fio's argv: globals, then a job per slot with fio and a namespace; argc */
int fio_argv(char **argv, int max, char *const *globals, struct slot *slots, int n,
	     char names[][48], char files[][64]);
/* err[i]: fio's error code of slot i's job from its JSON report, -1 if none */
void fio_job_errors(const char *report, struct slot *slots, int n, int *err);
/* arm's background fio supervisor: D/fio-SLOT.end and .exit, D/fio.done */
void supervise(const char *dir, struct slot *slots, int n, int runtime);
/* a slot of arm's state.json (collect.c); -1 without its name */
int slot_from_json(struct json_object *o, struct slot *s);
/* I/Os (reads + writes) completed on namespace ns; 0 if unreadable */
unsigned long long ns_io(const char *ns);

/* checks collected into {"checks": [...]} */
struct checks {
	struct json_object *list;
	int failed;
};
void check_init(struct checks *c);
void check(struct checks *c, bool ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

int cmd_smoke(int argc, char **argv, struct json_object *out);
int cmd_findings(int argc, char **argv, struct json_object *out);
int cmd_arm(int argc, char **argv, struct json_object *out);
int cmd_collect(int argc, char **argv, struct json_object *out);
int cmd_supervise(int argc, char **argv, struct json_object *out);
int cmd_drives(int argc, char **argv, struct json_object *out);
int cmd_view(int argc, char **argv, struct json_object *out);
int cmd_pm(int argc, char **argv, struct json_object *out);
int cmd_absent(int argc, char **argv, struct json_object *out);
int cmd_pme(int argc, char **argv, struct json_object *out);
int cmd_dpc(int argc, char **argv, struct json_object *out);
/* bars.c: slot windows, BARs and their assignment (moving BARs) */
int cmd_bars(int argc, char **argv, struct json_object *out);
/* rescan.c: a bus rescan loop beside a scenario; /proc/lock_stat rows */
int cmd_rescan_loop(int argc, char **argv, struct json_object *out);
int cmd_lockstat(int argc, char **argv, struct json_object *out);

#endif
