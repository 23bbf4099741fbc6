/* Counting kprobes: a group of probes enabled in a tracefs instance of the
 * group's name, so hits are counted in kprobe_profile and nothing is traced
 * into the main buffer (other users of tracing are left alone). */
#include "labprobe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* kprobe_events must be appended to: a truncating write drops every probe. */
static int append(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_APPEND), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

void kprobes_remove(const char *group, const struct kprobe_def *p, size_t n)
{
	char path[256], def[128];

	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), TRACEFS "/instances/%s/events/%s/%s/enable", group, group, p[i].name);
		append(path, "0");
	}
	snprintf(path, sizeof(path), TRACEFS "/instances/%s", group);
	rmdir(path);
	for (size_t i = 0; i < n; i++) {
		snprintf(def, sizeof(def), "-:%s/%s\n", group, p[i].name);
		append(TRACEFS "/kprobe_events", def);
	}
}

/* Enabling the first trace event that records task names, and disabling
 * the last one, registers and unregisters a sched_switch probe: a live patch
 * (text_poke_bp) of __schedule(), the hottest code in the kernel, at every
 * arm and collect. Under TCG with starved vCPUs that patch locked a stock
 * guest up for good in the 4-VM run scale7 (CPU0 in text_poke_bp_batch()
 * waiting for CPU1's IPI answer, CPU1 trapping on the int3 in __schedule()
 * with interrupts off). One rare event left enabled in an instance of its
 * own keeps the probe registered: __schedule() is patched once, at the
 * first arm, and never again.
 * The same goes for the sched_switch event that arm's cpu_window enables
 * (window.c) beside that probe: a tracepoint with one probe calls it
 * directly, with two it calls an iterator, and going from one to two (and
 * back at collect) patches the call site again. The pin instance also
 * enables sched_switch itself, filtered to record nothing (no pid is
 * negative), so the tracepoint has two probes from the first arm on and
 * cpu_window's comes and goes without a patch. */
void trace_pin_cmdline(void)
{
	mkdir(TRACEFS "/instances/labprobe-pin", 0755);
	append(TRACEFS "/instances/labprobe-pin/buffer_size_kb", "4");
	append(TRACEFS "/instances/labprobe-pin/events/oom/mark_victim/enable", "1");
	append(TRACEFS "/instances/labprobe-pin/events/sched/sched_switch/filter", "prev_pid < 0");
	append(TRACEFS "/instances/labprobe-pin/events/sched/sched_switch/enable", "1");
}

int kprobes_arm(const char *group, const struct kprobe_def *p, size_t n, struct json_object *out)
{
	struct json_object *errs = json_object_new_array();
	char def[256], path[256];
	int failed = 0;

	if (access(TRACEFS "/kprobe_events", F_OK))
		mount("nodev", TRACEFS, "tracefs", 0, NULL);
	trace_pin_cmdline();
	kprobes_remove(group, p, n);
	snprintf(path, sizeof(path), TRACEFS "/instances/%s", group);
	mkdir(path, 0755);
	for (size_t i = 0; i < n; i++) {
		int ret;

		snprintf(def, sizeof(def), "p:%s/%s %s\n", group, p[i].name, p[i].def);
		ret = append(TRACEFS "/kprobe_events", def);
		snprintf(path, sizeof(path), TRACEFS "/instances/%s/events/%s/%s/enable", group, group, p[i].name);
		if (!ret)
			ret = append(path, "1");
		if (ret) {
			char e[256];

			snprintf(e, sizeof(e), "%s (%s): %s", p[i].name, p[i].def, strerror(-ret));
			json_object_array_add(errs, json_object_new_string(e));
			failed++;
		}
	}
	if (failed)
		kprobes_remove(group, p, n);
	json_object_object_add(out, "armed", json_object_new_boolean(!failed));
	json_object_object_add(out, "errors", errs);
	return failed ? 1 : 0;
}

/* Read the group's hits into hits[], remove the probes, report the hits as
 * out's "kprobe_hits" (null for a probe that was not armed); true if every
 * probe was armed. */
bool kprobes_collect(const char *group, const struct kprobe_def *p, size_t n, long long *hits,
		     struct json_object *out)
{
	struct json_object *h = json_object_new_object();
	bool armed = true;

	kprobes_hits(group, p, n, hits);
	kprobes_remove(group, p, n);
	for (size_t i = 0; i < n; i++) {
		json_object_object_add(h, p[i].name, hits[i] >= 0 ? json_object_new_int64(hits[i]) : NULL);
		armed &= hits[i] >= 0;
	}
	json_object_object_add(out, "kprobe_hits", h);
	return armed;
}

/* Hits of the group's probes from kprobe_profile ("  NAME  HITS  MISSES");
 * -1 for a probe that is not armed. */
void kprobes_hits(const char *group, const struct kprobe_def *p, size_t n, long long *hits)
{
	FILE *f = fopen(TRACEFS "/kprobe_profile", "r");
	char line[512], name[128];
	size_t glen = strlen(group);
	long long h, m;

	for (size_t i = 0; i < n; i++)
		hits[i] = -1;
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%127s %lld %lld", name, &h, &m) != 3)
			continue;
		/* 6.1 prints the event name alone; later kernels GROUP/NAME */
		const char *e = (!strncmp(name, group, glen) && name[glen] == '/') ? name + glen + 1 : name;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(e, p[i].name))
				hits[i] = h;
	}
	if (f)
		fclose(f);
}
