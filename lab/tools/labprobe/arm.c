/* labprobe arm: the first half of the hot-removal measurement, the same
 * on every kernel variant (collect.c is the second half; drives.c checks
 * the drives that come back; the file header of collect.c says what is
 * measured).
 *
 *   labprobe arm --dir D --slots N,... [--fio N,...] [--fio-runtime S]
 *                [--hung-task-timeout S]
 *
 * arm snapshots what each slot holds (D/state.json), starts kprobe events
 * (trace.c) in a tracefs instance of its own (clock: mono, i.e.
 * CLOCK_MONOTONIC, printed in us) and, optionally, a verifying fio job on
 * each named drive, supervised by a background process that records when
 * each job ends (fio.c). The host then acts (hpslot). */
#include "labprobe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

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
	/* and upstream's hotplug event (0001), where the kernel has it */
	json_object_object_add(state, "hp_event_tracepoint", json_object_new_boolean(
		writef(INSTANCE "/events/pci/pci_hp_event/enable", "1") == 0));
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
