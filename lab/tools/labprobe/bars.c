/* labprobe bars: where the PCI resources of hotplug slots are (issue 23,
 * moving BARs): each slot's root port windows, the BARs of every function
 * below it and whether the kernel assigned them, the driver bound, the
 * kernel's lines about those functions since a sequence number, and the
 * memory part of the resource tree (/proc/iomem).
 *
 * A BAR counts as assigned when sysfs shows it a non-zero start. One the
 * kernel could not place is reset to nothing in sysfs; its own line ("BAR
 * 2 [mem size 0x40000000 64bit pref]: failed to assign") since --since-seq
 * is what says the device has it, and its size. */
#include "labprobe.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BARS_MAX_FUNCS 8
#define IORESOURCE_IO 0x100
#define IORESOURCE_MEM 0x200
#define IORESOURCE_PREFETCH 0x2000
#define IORESOURCE_MEM_64 0x100000

struct res {
	uint64_t start, end, flags;
};

static int read_resources(const char *dev, struct res *r, int max)
{
	char path[300];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (n < max && fscanf(f, "%" SCNx64 " %" SCNx64 " %" SCNx64, &r[n].start, &r[n].end, &r[n].flags) == 3)
		n++;
	fclose(f);
	return n;
}

static const char *res_kind(uint64_t flags)
{
	if (flags & IORESOURCE_IO)
		return "io";
	if (flags & IORESOURCE_PREFETCH)
		return flags & IORESOURCE_MEM_64 ? "pref64" : "pref";
	return flags & IORESOURCE_MEM ? (flags & IORESOURCE_MEM_64 ? "mem64" : "mem") : "none";
}

static struct json_object *res_json(const struct res *r, int index)
{
	struct json_object *o = json_object_new_object();
	char hex[32];
	uint64_t size = r->end >= r->start && (r->end || r->start) ? r->end - r->start + 1 : 0;

	json_object_object_add(o, "index", json_object_new_int(index));
	json_object_object_add(o, "kind", json_object_new_string(res_kind(r->flags)));
	snprintf(hex, sizeof(hex), "0x%" PRIx64, r->start);
	json_object_object_add(o, "start", json_object_new_string(hex));
	snprintf(hex, sizeof(hex), "0x%" PRIx64, r->end);
	json_object_object_add(o, "end", json_object_new_string(hex));
	json_object_object_add(o, "size", json_object_new_uint64(size));
	json_object_object_add(o, "assigned", json_object_new_boolean(r->start != 0));
	return o;
}

/* The BARs the kernel said it failed to assign in log lines: "BAR 2
 * [mem size 0x40000000 64bit pref]: failed to assign" (6.1.y today) or
 * "BAR 2: failed to assign [mem size 0x40000000 64bit pref]" (older); the
 * size too. A BAR it failed to place is reset to nothing in sysfs, so the
 * log is the only place that still says the device has it. */
static void failed_bars(struct json_object *log, uint64_t size[6], bool failed[6])
{
	for (size_t k = 0; log && k < json_object_array_length(log); k++) {
		const char *l = json_object_get_string(json_object_array_get_idx(log, k));
		const char *b = l ? strstr(l, " BAR ") : NULL, *z;
		int i;

		if (!b || !strstr(l, "failed to assign") || sscanf(b, " BAR %d", &i) != 1 || i < 0 || i > 5)
			continue;
		failed[i] = true;
		if ((z = strstr(b, "size 0x")))
			size[i] = strtoull(z + 5, NULL, 16);
	}
}

/* One function below the slot: its BARs (sized ones, and those the
 * kernel failed to assign), ROM left out */
static struct json_object *func_json(const char *dev, struct json_object *log, int *unassigned, bool *bound)
{
	struct json_object *o = json_object_new_object(), *bars = json_object_new_array();
	struct res r[17];
	char drv[64] = "";
	int n = read_resources(dev, r, 17);
	uint64_t fsize[6] = { 0 };
	bool failed[6] = { false };

	failed_bars(log, fsize, failed);
	*unassigned = 0;
	for (int i = 0; i < 6; i++) {
		struct res none = { 0, fsize[i] ? fsize[i] - 1 : 0, 0 };

		if (i < n && r[i].flags && (r[i].start || r[i].end)) {
			json_object_array_add(bars, res_json(&r[i], i));
			*unassigned += !r[i].start;
		} else if (failed[i]) {
			/* reset by the kernel: the size from its line */
			json_object_array_add(bars, res_json(&none, i));
			(*unassigned)++;
		}
	}
	*bound = link_base(drv, sizeof(drv), "%s/sys/bus/pci/devices/%s/driver", "", dev);
	json_object_object_add(o, "dev", json_object_new_string(dev));
	json_object_object_add(o, "driver", *bound ? json_object_new_string(drv) : NULL);
	json_object_object_add(o, "bars", bars);
	json_object_object_add(o, "unassigned", json_object_new_int(*unassigned));
	json_object_object_add(o, "log", json_object_get(log));
	return o;
}

/* The functions on bus `bus`, sorted: names into funcs */
static int bus_funcs(int bus, char funcs[][32], int max)
{
	char path[300], prefix[16];
	DIR *d;
	struct dirent *e;
	int n = 0;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices");
	snprintf(prefix, sizeof(prefix), "0000:%02x:", bus);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max)
		if (!strncmp(e->d_name, prefix, strlen(prefix)) && strlen(e->d_name) < 32)
			scopy(funcs[n++], 32, e->d_name);
	closedir(d);
	qsort(funcs, (size_t)n, 32, (int (*)(const void *, const void *))strcmp);
	return n;
}

/* what a slot is checked for: a function below it (a hot-add done), or
 * also every BAR assigned and a driver bound */
enum bars_want { WANT_NOTHING, WANT_PRESENT, WANT_BOUND };

static void bars_slot(const char *slot, enum bars_want want, unsigned long long since, bool with_log,
		      struct json_object *slots, struct checks *c)
{
	struct json_object *o = json_object_new_object(), *wins = json_object_new_array(), *funcs;
	char port[32] = "", list[BARS_MAX_FUNCS][32];
	int bus = slot_bus(slot), nf = 0, nr, total_unassigned = 0;
	bool all_bound = true;
	struct res r[17];

	json_object_object_add(o, "slot", json_object_new_string(slot));
	if (bus < 0 || !slot_port(bus, port, sizeof(port))) {
		json_object_object_add(o, "error", json_object_new_string("no such hotplug slot, or no port for it"));
		json_object_array_add(slots, o);
		check(c, false, "slot-found", "slot %s: not in /sys/bus/pci/slots, or no bridge serves it", slot);
		return;
	}
	json_object_object_add(o, "port", json_object_new_string(port));
	/* a bridge's sysfs resource file ends with its 4 window lines (io,
	 * mem, pref, and a spare): 13-16, or 7-10 without SR-IOV */
	nr = read_resources(port, r, 17);
	for (int i = nr - 4; nr >= 11 && i < nr - 1; i++)
		json_object_array_add(wins, res_json(&r[i], i));
	json_object_object_add(o, "windows", wins);
	funcs = json_object_new_array();
	nf = bus_funcs(bus, list, BARS_MAX_FUNCS);
	for (int i = 0; i < nf; i++) {
		int un;
		bool bound;

		/* the kernel's lines that name the function (a BAR it failed
		 * to assign is only there) */
		struct json_object *log = with_log ? kmsg_lines(since, list[i], 40) : json_object_new_array();

		json_object_array_add(funcs, func_json(list[i], log, &un, &bound));
		json_object_put(log);
		total_unassigned += un;
		all_bound &= bound;
	}
	json_object_object_add(o, "functions", funcs);
	json_object_array_add(slots, o);
	if (want != WANT_NOTHING)
		check(c, nf > 0, "device-present", "slot %s: %d function(s) below %s", slot, nf, port);
	if (want == WANT_BOUND) {
		check(c, nf > 0 && !total_unassigned, "bars-assigned", "slot %s: %d BAR(s) the kernel could not assign",
		      slot, total_unassigned);
		check(c, nf > 0 && all_bound, "driver-bound", "slot %s: %s", slot,
		      all_bound ? "every function has its driver" : "a function without a driver");
	}
}

/* One look at every slot (want[i] for names[i]): the slots' JSON; its
 * checks in c (initialised here) */
static struct json_object *bars_look(char **names, const enum bars_want *want, int nslots, long since,
				     bool with_log, struct checks *c)
{
	struct json_object *slots = json_object_new_array();

	check_init(c);
	for (int i = 0; i < nslots; i++)
		bars_slot(names[i], want[i], (unsigned long long)since, with_log, slots, c);
	return slots;
}

/* Mark each slot of the list --NAME gave (one of --slots) with w in want */
static int want_slots(const char *name, char *list, char **names, int nslots, enum bars_want *want,
		      enum bars_want w)
{
	char *each[64];
	int n = parse_slots(name, list, each, 64);

	for (int k = 0; k < n; k++) {
		int i = 0;

		while (i < nslots && strcmp(each[k], names[i]))
			i++;
		if (i == nslots) {
			fprintf(stderr, "labprobe bars: %s %s is not one of --slots\n", name, each[k]);
			return -1;
		}
		want[i] = w;
	}
	return n < 0 ? -1 : 0;
}

/* the resource tree: /proc/iomem's lines (root reads real addresses), at
 * most max */
static struct json_object *iomem_json(int max)
{
	struct json_object *arr = json_object_new_array();
	FILE *f = fopen("/proc/iomem", "r");
	char line[256];
	int n = 0;

	if (!f)
		return arr;
	while (n < max && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		json_object_array_add(arr, json_object_new_string(line));
		n++;
	}
	fclose(f);
	return arr;
}

int cmd_bars(int argc, char **argv, struct json_object *out)
{
	enum { OPT_SLOTS = OPT_FIRST, OPT_EXPECT_BOUND, OPT_EXPECT_PRESENT, OPT_SINCE_SEQ, OPT_TIMEOUT };
	static const struct option opts[] = {
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "expect-bound", required_argument, NULL, OPT_EXPECT_BOUND },
		{ "expect-present", required_argument, NULL, OPT_EXPECT_PRESENT },
		{ "since-seq", required_argument, NULL, OPT_SINCE_SEQ },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ NULL, 0, NULL, 0 },
	};
	char *names[64], *bound = NULL, *present = NULL;
	enum bars_want want[64] = { WANT_NOTHING };
	int nslots = 0, opt;
	long since = 0;
	bool since_given = false;
	double timeout = 0, start = now_mono();
	struct json_object *slots = NULL, *findings = NULL;
	struct checks c = { 0 };
	int looks = 0;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_SLOTS:
			if ((nslots = parse_slots("--slots", strdup(optarg), names, 64)) < 0)
				return 2;
			break;
		case OPT_EXPECT_BOUND:
			bound = optarg;
			break;
		case OPT_EXPECT_PRESENT:
			present = optarg;
			break;
		case OPT_SINCE_SEQ:
			if (parse_long_opt("--since-seq", optarg, 0, LONG_MAX, &since))
				return 2;
			since_given = true;
			break;
		case OPT_TIMEOUT:
			if (parse_double_opt("--timeout", optarg, 0, TIMEOUT_MAX, &timeout))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (!nslots) {
		fprintf(stderr, "labprobe bars: --slots N,... is required\n");
		return 2;
	}
	if ((present && want_slots("--expect-present", strdup(present), names, nslots, want, WANT_PRESENT)) ||
	    (bound && want_slots("--expect-bound", strdup(bound), names, nslots, want, WANT_BOUND)))
		return 2;
	/* look at sysfs until every check holds (a hot-add still being
	 * configured) or the timeout passed, then once more with the
	 * kernel's lines (a failed BAR is only there) and its log's
	 * findings: the log is read once, not on every look */
	for (;;) {
		slots = bars_look(names, want, nslots, since, false, &c);
		looks++;
		if (!c.failed || now_mono() - start >= timeout)
			break;
		json_object_put(slots);
		json_object_put(c.list);
		usleep(500000);
	}
	json_object_put(slots);
	json_object_put(c.list);
	slots = bars_look(names, want, nslots, since, true, &c);
	findings = findings_check(&c, since_given, since);
	json_object_object_add(out, "looks", json_object_new_int(looks));
	json_object_object_add(out, "slots", slots);
	json_object_object_add(out, "iomem", iomem_json(400));
	json_object_object_add(out, "kmsg_last_seq", kmsg_last_seq_json());
	json_object_object_add(out, "findings", findings);
	json_object_object_add(out, "checks", c.list);
	return c.failed ? 1 : 0;
}
