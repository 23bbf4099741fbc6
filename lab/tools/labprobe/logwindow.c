/* A scenario's kernel-log window, and the canary that proves the gate fires.
 *
 *   labprobe log-window start [--canary K --token T [--provoke KIND]]
 *   labprobe log-window end --since-seq SEQ --boot-id ID [--token T [--provoke KIND]]
 *   labprobe log-window after
 *
 * Windows are chained: a window starts where the previous one of the same
 * boot closed (the state "closed"), or at the boot's first record, so that
 * every record from boot to the last close belongs to exactly one window:
 * the records between two scenarios, and the boot's, are the next
 * window's. after is the run's own last window: it scans every record from
 * the last close to now and closes there (the run's teardown follows).
 * end and after print what they covered ("covered": the boot, the first
 * and last sequence number; from 0 when the window began at the boot).
 *
 * start prints the sequence number the window starts after (0: the boot's
 * first record on) and the boot id, and forgets the scans of an earlier
 * window. From then on every scan of the log
 * (findings_scan: collect, view --since-seq, smoke, rescan-loop stop, ...)
 * notes the records it covered. end scans, with the same patterns, every
 * record after SEQ that no scan covered (the re-add, verify and restore
 * steps between two collects, the scenario's last steps) and reports them
 * as findings of its own: together the scenario's scans then cover its
 * whole window once. When the guest booted again inside the window (a
 * scenario that restarts its VM, or a VM lost and restarted) end scans the
 * new boot's records no scan covered and says "restarted": the earlier
 * boot's records after its last scan are gone with it. end's findings are
 * those of the whole window, so that a finding a step's caller dropped is
 * never lost (the record keeps each once, or as an observation where the
 * scenario measures it instead of failing on it).
 *
 * The canary: start --canary K --token T makes the K-th scan of the window
 * first write a WARNING-shaped line with T into the kernel log (through
 * /dev/kmsg, as user space can; the gate does not look at the facility),
 * so the scan finds it in its own window; K 0 writes it at start, among
 * the records between the previous window and the scenario's first step
 * (fired_at "start"). A scenario that makes fewer than K scans has it
 * written by end (fired_at "end"). end --token T
 * reports where the canary was written, and whether it was: a scenario
 * run with the canary must fail with that finding and no other.
 *
 * --provoke KIND (debug kernel, lab_provoke module loaded): instead of the
 * marked line, the canary asks kernel/modules/lab_provoke for a real report
 * of KIND (lockdep, kasan, sleep-in-atomic) by writing "KIND T" to its
 * debugfs file; the scenario must then fail with a finding of that kind,
 * which shows that the gate's pattern matches what the kernel prints.
 *
 * Both print "lockdep": "on" or "off" on a kernel with lockdep
 * (/proc/lockdep_stats' debug_locks), null without: lockdep turns itself
 * off for the rest of the boot after its first report or a kernel taint,
 * and a window it was off in checked no locking (lab_log_window_merge).
 *
 * Scans are noted only between start and end. State: LABPROBE_LOG_STATE=DIR
 * (tests), else /run/labprobe-log; /run is emptied at boot, so a restart
 * forgets the scans of the earlier boot. */
#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXRANGES 4096

static void state_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", hook("LABPROBE_LOG_STATE", "/run/labprobe-log"), name);
}

static int scans_so_far(void)
{
	char path[300], line[200];
	FILE *f;
	int n = 0;

	state_path(path, sizeof(path), "scanned");
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		n++;
	if (f)
		fclose(f);
	return n;
}

/* Where the previous window of this boot closed ("BOOTID SEQ" in the state
 * "closed"): the next window starts after SEQ; 0 (the boot's first record
 * on) when no window of this boot closed yet. */
static unsigned long long chained_since(const char *bid, bool *chained)
{
	char path[300], line[200], b[64];
	unsigned long long seq;

	*chained = false;
	state_path(path, sizeof(path), "closed");
	if (read_line(path, line, sizeof(line)) || sscanf(line, "%63s %llu", b, &seq) != 2 || strcmp(b, bid))
		return 0;
	*chained = true;
	return seq;
}

static void close_at(const char *bid, unsigned long long seq)
{
	char path[300], rec[100];

	snprintf(rec, sizeof(rec), "%s %llu\n", bid, seq);
	state_path(path, sizeof(path), "closed");
	write_str(path, rec);
}

/* What a window covered, for the run's log_coverage: every record of boot
 * bid after from (from 0: from its first record) up to last */
static struct json_object *covered_json(const char *bid, unsigned long long from, unsigned long long last)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "boot_id", json_object_new_string(bid));
	json_object_object_add(o, "after_seq", json_object_new_uint64(from));
	json_object_object_add(o, "from_boot", json_object_new_boolean(from == 0));
	json_object_object_add(o, "last_seq", json_object_new_uint64(last));
	return o;
}

/* The reports lab_provoke can provoke: the finding kinds of findings.c */
static const char *const provoke_kinds[] = { "lockdep", "kasan", "sleep-in-atomic", NULL };

static bool provoke_kind_ok(const char *kind)
{
	for (const char *const *k = provoke_kinds; *k; k++)
		if (!strcmp(kind, *k))
			return true;
	return false;
}

/* The canary line: what the gate must find ("^WARNING:", kind warning) */
static void canary_line(char *buf, size_t len, const char *token)
{
	snprintf(buf, len, "WARNING: lab-canary %s: a marked line labprobe wrote to show that the "
		 "kernel-log gate fails this scenario", token);
}

/* Asks lab_provoke for a report of kind; the module logs the token first */
static int provoke_write(const char *kind, const char *token)
{
	char rec[200];

	snprintf(rec, sizeof(rec), "%s %s\n", kind, token);
	return write_str(hook("LABPROBE_PROVOKE", "/sys/kernel/debug/lab_provoke/provoke"), rec);
}

/* Writes the canary (or provokes its report, with a kind); the test hook's
 * file of records gets a record */
static int canary_write(const char *token, const char *kind)
{
	const char *kmsg = hook("LABPROBE_KMSG", "/dev/kmsg");
	char msg[300], rec[400];
	int fd, n;

	if (kind[0])
		return provoke_write(kind, token);
	canary_line(msg, sizeof(msg), token);
	if (strcmp(kmsg, "/dev/kmsg"))
		n = snprintf(rec, sizeof(rec), "12,%llu,0,-;%s\n", kmsg_last_seq() + 1, msg);
	else
		/* the newline ends the record: without it the kernel keeps the
		 * record open for a continuation, and readers see it only once
		 * the next record arrives (in the next scenario's window) */
		n = snprintf(rec, sizeof(rec), "<4>%s\n", msg);
	fd = open(kmsg, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	if (write(fd, rec, (size_t)n) != n) {
		int err = errno;

		close(fd);
		return -err;
	}
	close(fd);
	return 0;
}

/* "K TOKEN KIND" (KIND "-" for the marked line) while the canary waits
 * for its scan; kind gets "" for the marked line */
static bool canary_pending(int *k, char *token, size_t len, char *kind, size_t klen)
{
	char path[300], line[200], tok[100], kd[32];
	bool got;

	state_path(path, sizeof(path), "canary");
	if (read_line(path, line, sizeof(line)))
		return false;
	got = sscanf(line, "%d %99s %31s", k, tok, kd) == 3;
	if (got) {
		scopy(token, len, tok);
		scopy(kind, klen, strcmp(kd, "-") ? kd : "");
	}
	return got;
}

/* where the canary with token was written ("scan-N", "end"), copied into
 * at; false when it was not */
static bool canary_fired_at(const char *token, char *at, size_t len)
{
	char path[300], line[200];
	size_t n = strlen(token);

	state_path(path, sizeof(path), "fired");
	if (read_line(path, line, sizeof(line)) || strncmp(line, token, n) || line[n] != ' ')
		return false;
	scopy(at, len, line + n + 1);
	return true;
}

static void canary_fired(const char *token, const char *at)
{
	char path[300];
	FILE *f;

	state_path(path, sizeof(path), "fired");
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%s %s\n", token, at);
		fclose(f);
	}
	state_path(path, sizeof(path), "canary");
	unlink(path);
}

void log_window_before_scan(void)
{
	char token[100], kind[32], at[32];
	int k, scan;

	if (!canary_pending(&k, token, sizeof(token), kind, sizeof(kind)))
		return;
	scan = k == 0 ? 0 : scans_so_far() + 1;
	if (scan < k)
		return;
	if (canary_write(token, kind) == 0) {
		if (scan)
			snprintf(at, sizeof(at), "scan-%d", scan);
		else
			scopy(at, sizeof(at), "start");
		canary_fired(token, at);
	}
}

void log_window_scanned(unsigned long long from, unsigned long long to)
{
	char path[300], bid[64];
	FILE *f;

	/* only inside a window log-window start opened */
	state_path(path, sizeof(path), "open");
	if (access(path, F_OK))
		return;
	state_path(path, sizeof(path), "scanned");
	boot_id(bid, sizeof(bid));
	f = fopen(path, "a");
	if (f) {
		fprintf(f, "%s %llu %llu\n", bid, from, to);
		fclose(f);
	}
}

/* "on" or "off" as /proc/lockdep_stats' debug_locks says, NULL (JSON
 * null) on a kernel without lockdep or when the line is missing */
static struct json_object *lockdep_state_json(void)
{
	FILE *f = fopen(hook("LABPROBE_LOCKDEP_STATS", "/proc/lockdep_stats"), "r");
	char line[200];
	int on = -1;

	while (f && on < 0 && fgets(line, sizeof(line), f)) {
		const char *p = line;

		while (*p == ' ')
			p++;
		if (!strncmp(p, "debug_locks:", 12))
			on = atoi(p + 12) != 0;
	}
	if (f)
		fclose(f);
	return on < 0 ? NULL : json_object_new_string(on ? "on" : "off");
}

static int start(int argc, char **argv, struct json_object *out)
{
	enum { OPT_CANARY = OPT_FIRST, OPT_TOKEN, OPT_PROVOKE };
	static const struct option opts[] = {
		{ "canary", required_argument, NULL, OPT_CANARY },
		{ "token", required_argument, NULL, OPT_TOKEN },
		{ "provoke", required_argument, NULL, OPT_PROVOKE },
		{ NULL, 0, NULL, 0 },
	};
	char path[300], bid[64];
	const char *token = NULL, *kind = NULL;
	int canary = 0, opt;
	bool canary_given = false, chained;
	unsigned long long since;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_CANARY:
			if (parse_int_opt("--canary", optarg, 0, 1000, &canary))
				return 2;
			canary_given = true;
			break;
		case OPT_TOKEN:
			token = optarg;
			if (!token[0] || strlen(token) > 64 || strpbrk(token, " \n")) {
				arg_error("--token: 1 to 64 characters, no spaces");
				return 2;
			}
			break;
		case OPT_PROVOKE:
			kind = optarg;
			if (!provoke_kind_ok(kind)) {
				arg_error("--provoke: lockdep, kasan or sleep-in-atomic, not '%s'", kind);
				return 2;
			}
			break;
		default:
			return 2;
		}
	}
	if (!canary_given != !token) {
		arg_error("--canary and --token go together");
		return 2;
	}
	if (kind && !canary_given) {
		arg_error("--provoke needs --canary and --token");
		return 2;
	}
	state_path(path, sizeof(path), "");
	if (mkdir_p(path, 0755)) {
		json_object_object_add(out, "error", json_object_new_string("cannot create the state directory"));
		return 1;
	}
	for (const char *const *n = (const char *const[]){ "scanned", "canary", "fired", NULL }; *n; n++) {
		state_path(path, sizeof(path), *n);
		unlink(path);
	}
	state_path(path, sizeof(path), "open");
	if (write_str(path, "open\n")) {
		json_object_object_add(out, "error", json_object_new_string("cannot open the window"));
		return 1;
	}
	if (canary_given) {
		FILE *f;

		state_path(path, sizeof(path), "canary");
		f = fopen(path, "w");
		if (!f || fprintf(f, "%d %s %s\n", canary, token, kind ? kind : "-") < 0 || fclose(f)) {
			json_object_object_add(out, "error", json_object_new_string("cannot keep the canary"));
			return 1;
		}
		json_object_object_add(out, "canary_at_scan", json_object_new_int(canary));
		if (kind)
			json_object_object_add(out, "canary_provoke", json_object_new_string(kind));
	}
	/* the log must be readable for the window to mean anything */
	{
		struct json_object *seq = kmsg_last_seq_json();

		if (!seq) {
			json_object_object_add(out, "error", json_object_new_string("the kernel log cannot be read"));
			return 1;
		}
		json_object_put(seq);
	}
	boot_id(bid, sizeof(bid));
	since = chained_since(bid, &chained);
	if (canary_given && canary == 0)
		log_window_before_scan();
	json_object_object_add(out, "since_seq", json_object_new_uint64(since));
	json_object_object_add(out, "chained", json_object_new_boolean(chained));
	json_object_object_add(out, "boot_id", json_object_new_string(bid));
	json_object_object_add(out, "lockdep", lockdep_state_json());
	return 0;
}

static int end(int argc, char **argv, struct json_object *out)
{
	enum { OPT_SINCE_SEQ = OPT_FIRST, OPT_BOOT_ID, OPT_TOKEN, OPT_PROVOKE };
	static const struct option opts[] = {
		{ "since-seq", required_argument, NULL, OPT_SINCE_SEQ },
		{ "boot-id", required_argument, NULL, OPT_BOOT_ID },
		{ "token", required_argument, NULL, OPT_TOKEN },
		{ "provoke", required_argument, NULL, OPT_PROVOKE },
		{ NULL, 0, NULL, 0 },
	};
	char path[300], line[200], bid[64], token[100] = "", want[100] = "";
	char kind[32] = "", want_kind[32] = "";
	long since = -1;
	const char *boot = NULL;
	unsigned long long (*r)[2] = calloc(MAXRANGES, sizeof(*r));
	int nr = 0, k, opt;
	bool restarted;
	FILE *f;
	struct json_object *findings, *canary;

	if (!r)
		return 1;
	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_SINCE_SEQ:
			if (parse_long_opt("--since-seq", optarg, 0, LONG_MAX, &since))
				goto bad;
			break;
		case OPT_BOOT_ID:
			boot = optarg;
			break;
		case OPT_TOKEN:
			scopy(want, sizeof(want), optarg);
			break;
		case OPT_PROVOKE:
			if (!provoke_kind_ok(optarg)) {
				arg_error("--provoke: lockdep, kasan or sleep-in-atomic, not '%s'", optarg);
				goto bad;
			}
			scopy(want_kind, sizeof(want_kind), optarg);
			break;
		default:
			goto bad;
		}
	}
	if (since < 0 || !boot) {
		arg_error("log-window end needs --since-seq and --boot-id (log-window start's)");
		goto bad;
	}
	if (want_kind[0] && !want[0]) {
		arg_error("--provoke needs --token");
		goto bad;
	}
	boot_id(bid, sizeof(bid));
	restarted = strcmp(bid, boot) != 0;

	/* a canary still waiting (fewer scans than K), or lost with a
	 * restart: written now, so the scan below finds it */
	if (canary_pending(&k, token, sizeof(token), kind, sizeof(kind)) || (want[0] && restarted)) {
		const char *t = token[0] ? token : want;

		if (!canary_fired_at(t, line, sizeof(line)) && canary_write(t, token[0] ? kind : want_kind) == 0)
			canary_fired(t, "end");
	}

	/* the ranges this boot's scans covered */
	state_path(path, sizeof(path), "scanned");
	f = fopen(path, "r");
	while (f && nr < MAXRANGES && fgets(line, sizeof(line), f)) {
		char b[64];

		if (sscanf(line, "%63s %llu %llu", b, &r[nr][0], &r[nr][1]) == 3 && !strcmp(b, bid))
			nr++;
	}
	if (f)
		fclose(f);
	/* what no step scanned, counted (unscanned_records); the findings
	 * are of the whole window: a step's scan that its caller did not
	 * keep is found again here (the record keeps each finding once) */
	findings = findings_scan_window(restarted ? 0 : (unsigned long long)since,
					(const unsigned long long (*)[2])r, nr, 8, out);
	free(r);
	{
		struct json_object *last;
		unsigned long long to = json_object_object_get_ex(out, "last_seq", &last) ?
					(unsigned long long)json_object_get_uint64(last) : 0;

		/* the next window starts here */
		close_at(bid, to);
		json_object_object_add(out, "covered",
				       covered_json(bid, restarted ? 0 : (unsigned long long)since, to));
	}
	json_object_object_add(out, "restarted", json_object_new_boolean(restarted));
	json_object_object_add(out, "scans", json_object_new_int(nr));
	json_object_object_add(out, "lockdep", lockdep_state_json());
	if (want[0]) {
		canary = json_object_new_object();
		json_object_object_add(canary, "fired_at", canary_fired_at(want, line, sizeof(line)) ?
				       json_object_new_string(line) : NULL);
		/* a provoked report's line is the kernel's: its kind is what to find */
		canary_line(line, sizeof(line), want);
		json_object_object_add(canary, "line", want_kind[0] ? NULL : json_object_new_string(line));
		json_object_object_add(canary, "provoke", want_kind[0] ? json_object_new_string(want_kind) : NULL);
		json_object_object_add(out, "canary", canary);
	}
	json_object_object_add(out, "findings", findings);
	state_path(path, sizeof(path), "open");
	unlink(path);
	return json_object_array_length(findings) ? 1 : 0;
bad:
	free(r);
	return 2;
}

/* The run's own last window: from the last close of this boot (or its
 * first record) to now, every record scanned; closes there. */
static int after(int argc, char **argv, struct json_object *out)
{
	static const struct option opts[] = { { NULL, 0, NULL, 0 } };
	char bid[64];
	unsigned long long since, to;
	bool chained;
	struct json_object *findings, *last;

	if (next_opt(argc, argv, opts, false) != -1)
		return 2;
	boot_id(bid, sizeof(bid));
	since = chained_since(bid, &chained);
	findings = findings_scan_window(since, NULL, 0, 8, out);
	to = json_object_object_get_ex(out, "last_seq", &last) ? (unsigned long long)json_object_get_uint64(last) : 0;
	close_at(bid, to);
	json_object_object_add(out, "chained", json_object_new_boolean(chained));
	json_object_object_add(out, "covered", covered_json(bid, since, to));
	json_object_object_add(out, "findings", findings);
	return json_object_array_length(findings) ? 1 : 0;
}

/* argv[0] "log-window", argv[1] the action: start(), end() and after() get
 * argv from the action on (their getopt_long's argv[0]) */
int cmd_log_window(int argc, char **argv, struct json_object *out)
{
	if (argc >= 2 && !strcmp(argv[1], "start"))
		return start(argc - 1, argv + 1, out);
	if (argc >= 2 && !strcmp(argv[1], "end"))
		return end(argc - 1, argv + 1, out);
	if (argc >= 2 && !strcmp(argv[1], "after"))
		return after(argc - 1, argv + 1, out);
	arg_error("log-window start | end | after");
	return 2;
}
