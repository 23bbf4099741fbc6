/* Kernel log gate: the lines that fail a scenario, with their context.
 * Reads /dev/kmsg from the oldest record the ring still holds. */
#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A needle starting with '^' must open the message (WARN() and lockdep
 * reports do; "Speculative Return Stack Overflow: WARNING: ..." does not). */
static const struct {
	const char *needle;
	const char *kind;
} patterns[] = {
	{ "^BUG:", "bug" },
	{ "kernel BUG at", "bug" },
	{ "^WARNING:", "warning" },
	{ "Oops", "oops" },
	{ "general protection fault", "oops" },
	{ "Kernel panic", "panic" },
	{ "possible circular locking", "lockdep" },
	{ "possible recursive locking", "lockdep" },
	{ "inconsistent lock state", "lockdep" },
	{ "blocked for more than", "hung-task" },
	{ "detected stall", "rcu-stall" },
	{ "detected stalls", "rcu-stall" },
	{ "soft lockup", "lockup" },
	{ "hard LOCKUP", "lockup" },
	{ "UBSAN:", "ubsan" },
	/* pciehp states that are wrong whenever the lab sees them */
	{ "Already disabled", "pciehp-state" },
	{ "Already enabled", "pciehp-state" },
	{ "cannot hot-add", "pciehp-state" },
	{ "Timeout on hotplug command", "pciehp-state" },
};

struct rec {
	unsigned long long seq;
	double ts;
	char *msg;
};

/* Parses "pri,seq,ts_usec,flags;message"; returns false for junk. */
static bool parse_record(char *line, struct rec *r)
{
	char *semi = strchr(line, ';');
	unsigned int pri;
	unsigned long long seq, usec;

	if (!semi || sscanf(line, "%u,%llu,%llu", &pri, &seq, &usec) != 3)
		return false;
	r->seq = seq;
	r->ts = (double)usec / 1e6;
	r->msg = strdup(semi + 1);
	r->msg[strcspn(r->msg, "\n")] = '\0';
	return true;
}

static size_t read_all(struct rec **out)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	char buf[8192];
	struct rec *recs = NULL;
	size_t n = 0, cap = 0;

	if (fd < 0)
		return 0;
	for (;;) {
		ssize_t len = read(fd, buf, sizeof(buf) - 1);
		struct rec r;

		if (len < 0) {
			if (errno == EPIPE)	/* overwritten while reading: go on */
				continue;
			break;
		}
		buf[len] = '\0';
		if (!parse_record(buf, &r))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			recs = realloc(recs, cap * sizeof(*recs));
			if (!recs)
				abort();
		}
		recs[n++] = r;
	}
	close(fd);
	*out = recs;
	return n;
}

unsigned long long kmsg_last_seq(void)
{
	struct rec *recs;
	size_t n = read_all(&recs);
	unsigned long long seq = n ? recs[n - 1].seq : 0;

	for (size_t i = 0; i < n; i++)
		free(recs[i].msg);
	free(recs);
	return seq;
}

struct json_object *kmsg_lines(unsigned long long since, const char *needle, int max)
{
	struct json_object *arr = json_object_new_array();
	struct rec *recs;
	size_t n = read_all(&recs), first = n;
	int taken = 0;

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
	for (size_t i = 0; i < n; i++)
		free(recs[i].msg);
	free(recs);
	return arr;
}

struct json_object *findings_scan(unsigned long long since_seq, int context)
{
	struct json_object *list = json_object_new_array();
	struct rec *recs;
	size_t n = read_all(&recs);

	for (size_t i = 0; i < n; i++) {
		const char *kind = NULL;
		struct json_object *o, *ctx;

		if (recs[i].seq <= since_seq && since_seq)
			continue;
		for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
			const char *needle = patterns[p].needle;
			bool hit = needle[0] == '^' ?
				   !strncmp(recs[i].msg, needle + 1, strlen(needle + 1)) :
				   strstr(recs[i].msg, needle) != NULL;

			if (hit) {
				kind = patterns[p].kind;
				break;
			}
		}
		if (!kind)
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "kind", json_object_new_string(kind));
		json_object_object_add(o, "time", json_object_new_double(recs[i].ts));
		json_object_object_add(o, "line", json_object_new_string(recs[i].msg));
		ctx = json_object_new_array();
		for (size_t j = i > (size_t)context ? i - context : 0;
		     j < n && j <= i + (size_t)context; j++) {
			char line[1100];

			snprintf(line, sizeof(line), "[%12.6f] %.1000s", recs[j].ts, recs[j].msg);
			json_object_array_add(ctx, json_object_new_string(line));
		}
		json_object_object_add(o, "context", ctx);
		json_object_array_add(list, o);
	}
	for (size_t i = 0; i < n; i++)
		free(recs[i].msg);
	free(recs);
	return list;
}

int cmd_findings(int argc, char **argv, struct json_object *out)
{
	unsigned long long since = 0;
	int context = 8;
	struct json_object *f;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--since-seq") && i + 1 < argc)
			since = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--context") && i + 1 < argc)
			context = atoi(argv[++i]);
		else {
			fprintf(stderr, "labprobe findings: unknown argument '%s'\n", argv[i]);
			return 2;
		}
	}
	f = findings_scan(since, context);
	json_object_object_add(out, "kmsg_last_seq", json_object_new_uint64(kmsg_last_seq()));
	json_object_object_add(out, "findings", f);
	return json_object_array_length(f) ? 1 : 0;
}
