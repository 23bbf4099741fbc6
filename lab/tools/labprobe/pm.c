/* labprobe pm: runtime power management of the root ports that serve
 * hotplug slots, as the guest's sysfs shows it, without waking them.
 *
 *   labprobe pm --slots N,... [--pm-cap] [--dyndbg] [--wakeup N=enabled|disabled,...]
 *               [--d3cold N,...] [--hold S] [--touch N,...]
 *               [--wait N=active|suspended,... [--timeout S]]
 *
 * Actions run in this order: --dyndbg turns on the PCI core's debug lines
 * that say a device below an ExternalFacingPort was marked untrusted or
 * removable; --wakeup writes the ports' power/wakeup; --d3cold writes 1 to
 * the ports' d3cold_allowed; --hold watches every port for S seconds (did
 * anything wake it?); --touch reads the first 64 bytes of each port's
 * config space, the access that runtime-resumes a port in D3cold (cover
 * letter of seed 001); --wait polls until each named port has the runtime
 * status asked for. Every change of runtime status or PCI power state seen
 * while holding or waiting is recorded with its time (CLOCK_MONOTONIC,
 * seconds since the command started, polled every 10 ms).
 *
 * Reading a port's config space resumes it when it is in D3cold, so
 * --pm-cap (is there a PCI PM capability?) reads ports in D0, and looks for
 * pci_pm_init()'s "PME# supported" line of the others in the kernel log.
 * Exit 0 when every --wait was met, 1 when not, 2 on bad arguments.
 */
#include "labprobe.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS 256
#define POLL_NS 10000000L

struct port {
	char slot[16];
	char dev[32];		/* "0000:00:03.0"; "" when the slot is unknown */
	int bus;
	char status[32];	/* power/runtime_status */
	char state[16];		/* power_state: the PCI core's current_state */
	char want[16];		/* --wait target, "" if none */
	double reached;		/* seconds until want was seen, < 0 if not */
	struct json_object *changes;
};

static void attr(const char *dev, const char *name, char *buf, size_t len)
{
	if (read_linef(buf, len, "/sys/bus/pci/devices/%s/%s", dev, name) < 0)
		scopy(buf, len, "");
}

static void add_attr(struct json_object *o, const char *key, const char *dev, const char *name)
{
	char buf[128];

	if (read_linef(buf, sizeof(buf), "/sys/bus/pci/devices/%s/%s", dev, name) < 0)
		json_object_object_add(o, key, NULL);
	else
		json_object_object_add(o, key, json_object_new_string(buf));
}

/* Does the port have a PCI PM capability? Read from its config space in
 * D0; a port not in D0 would be woken by that read, so then the kernel log
 * decides: pci_pm_init() logs "PME# supported from ..." for a PM capability
 * with PME (the only kind the lab's ports have). -1: not known. */
static int pm_cap(const struct port *p)
{
	uint8_t cfg[256];
	ssize_t n;

	if (strcmp(p->state, "D0")) {
		char needle[96];
		struct json_object *hits;
		int found;

		snprintf(needle, sizeof(needle), "%s: PME# supported from", p->dev);
		hits = kmsg_lines(0, needle, 1);
		found = json_object_array_length(hits) > 0 && !kmsg_error();	/* not the error line */
		json_object_put(hits);
		return found ? 1 : -1;
	}
	n = pci_config_read(p->dev, cfg, sizeof(cfg));
	if (n < 64)
		return -1;
	return pci_find_cap(cfg, (size_t)n, 0x01) ? 1 : 0;	/* PCI_CAP_ID_PM */
}

static void sample(struct port *p, double t)
{
	char status[32], state[16];

	attr(p->dev, "power/runtime_status", status, sizeof(status));
	attr(p->dev, "power_state", state, sizeof(state));
	if (strcmp(status, p->status) || strcmp(state, p->state)) {
		struct json_object *c = json_object_new_object();

		json_object_object_add(c, "t_s", json_object_new_double(t));
		json_object_object_add(c, "runtime_status", json_object_new_string(status));
		json_object_object_add(c, "power_state", json_object_new_string(state));
		json_object_array_add(p->changes, c);
		scopy(p->status, sizeof(p->status), status);
		scopy(p->state, sizeof(p->state), state);
	}
	if (p->want[0] && p->reached < 0 && !strcmp(p->status, p->want))
		p->reached = t;
}

static void watch(struct port *ports, int n, double t0, double seconds, bool until_met)
{
	struct timespec ts = { 0, POLL_NS };
	double end = now_mono() + seconds;

	for (;;) {
		bool met = true;

		for (int i = 0; i < n; i++) {
			if (!ports[i].dev[0])
				continue;
			sample(&ports[i], now_mono() - t0);
			if (ports[i].want[0] && ports[i].reached < 0)
				met = false;
		}
		if ((until_met && met) || now_mono() >= end)
			return;
		nanosleep(&ts, NULL);
	}
}

/* Sum of the port's interrupt counts over all CPUs in /proc/interrupts. */
static long long irq_count(const char *dev)
{
	int irqs[8], n = port_irqs(dev, irqs, 8);
	long long total = 0;
	char line[1024];
	FILE *f;

	if (n <= 0 || !(f = fopen("/proc/interrupts", "r")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;
		long irq = strtol(p, &end, 10);

		if (end == p || *end != ':')
			continue;
		for (int i = 0; i < n; i++) {
			if (irqs[i] != irq)
				continue;
			for (p = end + 1;;) {
				long long v = strtoll(p, &end, 10);

				if (end == p)
					break;
				total += v;
				p = end;
			}
		}
	}
	fclose(f);
	return total;
}

/* The PCI functions on the port's secondary bus: address, driver, removable. */
static struct json_object *below(int bus)
{
	struct json_object *arr = json_object_new_array();
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *e;
	char prefix[32];

	if (!d)
		return arr;
	snprintf(prefix, sizeof(prefix), "0000:%02x:", bus);
	while ((e = readdir(d))) {
		struct json_object *o;
		char drv[64];

		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		o = json_object_new_object();
		json_object_object_add(o, "dev", json_object_new_string(e->d_name));
		if (link_base(drv, sizeof(drv), "/sys/bus/pci/devices/%s/driver", e->d_name))
			json_object_object_add(o, "driver", json_object_new_string(drv));
		else
			json_object_object_add(o, "driver", NULL);
		/* absent unless the core decided (ExternalFacingPort above) */
		add_attr(o, "removable", e->d_name, "removable");
		json_object_array_add(arr, o);
	}
	closedir(d);
	return arr;
}

static struct json_object *report(struct port *p, bool want_cap)
{
	struct json_object *o = json_object_new_object();
	char path[256];
	int cap;

	json_object_object_add(o, "slot", json_object_new_string(p->slot));
	if (!p->dev[0]) {
		json_object_object_add(o, "port", NULL);
		return o;
	}
	json_object_object_add(o, "port", json_object_new_string(p->dev));
	snprintf(path, sizeof(path), "firmware_node/path");
	add_attr(o, "acpi_path", p->dev, path);
	add_attr(o, "control", p->dev, "power/control");
	add_attr(o, "runtime_status", p->dev, "power/runtime_status");
	add_attr(o, "autosuspend_delay_ms", p->dev, "power/autosuspend_delay_ms");
	add_attr(o, "power_state", p->dev, "power_state");
	add_attr(o, "real_power_state", p->dev, "firmware_node/real_power_state");
	add_attr(o, "d3cold_allowed", p->dev, "d3cold_allowed");
	add_attr(o, "wakeup", p->dev, "power/wakeup");
	add_attr(o, "runtime_suspended_time_ms", p->dev, "power/runtime_suspended_time");
	json_object_object_add(o, "irq_count", json_object_new_int64(irq_count(p->dev)));
	if (want_cap) {
		cap = pm_cap(p);
		json_object_object_add(o, "pm_cap", cap < 0 ? NULL : json_object_new_boolean(cap));
	}
	json_object_object_add(o, "below", below(p->bus));
	if (p->want[0]) {
		json_object_object_add(o, "wanted", json_object_new_string(p->want));
		json_object_object_add(o, "reached_after_s",
				       p->reached < 0 ? NULL : json_object_new_double(p->reached));
	}
	json_object_object_add(o, "changes", json_object_get(p->changes));
	return o;
}

static struct port *find(struct port *ports, int n, const char *slot)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(ports[i].slot, slot))
			return &ports[i];
	return NULL;
}

/* A SLOT[=VALUE],... option, split and checked before pm acts. */
struct slot_list {
	char *items[MAX_PORTS];
	const char *values[MAX_PORTS];	/* "" where no value is given */
	int n;
};

/* Splits arg (NULL: the option was not given) into l; every slot must be
 * one of --slots, every value one of `allowed` (NULL: no value taken). */
static int slot_list_parse(struct slot_list *l, const char *opt, char *arg, struct port *ports, int n,
			   const char *const *allowed, bool value_required)
{
	l->n = arg ? parse_slot_values(opt, arg, l->items, l->values, MAX_PORTS, !value_required) : 0;
	if (l->n < 0)
		return -1;
	for (int i = 0; i < l->n; i++) {
		bool ok = !l->values[i][0] && !value_required;

		if (!find(ports, n, l->items[i])) {
			arg_error("%s names slot %s, which is not in --slots", opt, l->items[i]);
			return -1;
		}
		for (int k = 0; allowed && allowed[k]; k++)
			ok |= !strcmp(l->values[i], allowed[k]);
		if (!ok && allowed)
			arg_error("%s takes SLOT=%s|%s, got '%s=%s'", opt, allowed[0], allowed[1], l->items[i],
				  l->values[i]);
		else if (!ok)
			arg_error("%s takes slot numbers, got '%s=%s'", opt, l->items[i], l->values[i]);
		if (!ok)
			return -1;
	}
	return 0;
}

/* Applies fn to each SLOT[=VALUE] item of a checked list (value NULL when
 * none was given); 1 if one failed. */
static int each(struct port *ports, int n, const struct slot_list *l, struct json_object *errs,
		int (*fn)(struct port *p, const char *value, struct json_object *errs))
{
	int bad = 0;

	for (int i = 0; i < l->n; i++) {
		struct port *p = find(ports, n, l->items[i]);

		if (!p->dev[0]) {
			json_object_array_add(errs, json_object_new_string("slot has no port"));
			bad = 1;
			continue;
		}
		bad |= fn(p, l->values[i][0] ? l->values[i] : NULL, errs);
	}
	return bad;
}

static int write_attr(struct port *p, const char *name, const char *value, struct json_object *errs)
{
	char path[256], msg[320];
	int ret;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", p->dev, name);
	ret = write_str(path, value);
	if (ret) {
		snprintf(msg, sizeof(msg), "writing %s to %s: %s", value, path, strerror(-ret));
		json_object_array_add(errs, json_object_new_string(msg));
		return 1;
	}
	return 0;
}

static int do_wakeup(struct port *p, const char *v, struct json_object *errs)
{
	return write_attr(p, "power/wakeup", v ? v : "enabled", errs);
}

static int do_d3cold(struct port *p, const char *v, struct json_object *errs)
{
	(void)v;
	return write_attr(p, "d3cold_allowed", "1", errs);
}

static int do_touch(struct port *p, const char *v, struct json_object *errs)
{
	char buf[64], msg[200];

	(void)v;
	if (pci_config_read(p->dev, buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
		snprintf(msg, sizeof(msg), "reading /sys/bus/pci/devices/%s/config failed", p->dev);
		json_object_array_add(errs, json_object_new_string(msg));
		return 1;
	}
	return 0;
}

static int do_want(struct port *p, const char *v, struct json_object *errs)
{
	(void)errs;
	scopy(p->want, sizeof(p->want), v);	/* active or suspended: checked */
	return 0;
}

static bool cmdline_has(const char *word)
{
	char line[4096];

	if (read_line("/proc/cmdline", line, sizeof(line)) < 0)
		return false;
	for (char *t = strtok(line, " "); t; t = strtok(NULL, " "))
		if (!strcmp(t, word))
			return true;
	return false;
}

int cmd_pm(int argc, char **argv, struct json_object *out)
{
	static const char *const wakeup_values[] = { "enabled", "disabled", NULL };
	static const char *const wait_values[] = { "active", "suspended", NULL };
	enum { OPT_SLOTS = OPT_FIRST, OPT_PM_CAP, OPT_DYNDBG, OPT_WAKEUP, OPT_D3COLD, OPT_HOLD, OPT_TOUCH,
	       OPT_WAIT, OPT_TIMEOUT };
	static const struct option opts[] = {
		{ "slots", required_argument, NULL, OPT_SLOTS },
		{ "pm-cap", no_argument, NULL, OPT_PM_CAP },
		{ "dyndbg", no_argument, NULL, OPT_DYNDBG },
		{ "wakeup", required_argument, NULL, OPT_WAKEUP },
		{ "d3cold", required_argument, NULL, OPT_D3COLD },
		{ "hold", required_argument, NULL, OPT_HOLD },
		{ "touch", required_argument, NULL, OPT_TOUCH },
		{ "wait", required_argument, NULL, OPT_WAIT },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ NULL, 0, NULL, 0 },
	};
	char *slots = NULL, *wakeup = NULL, *d3cold = NULL, *touch = NULL, *wait = NULL;
	double hold = 0, timeout = 10, t0 = now_mono();
	bool want_cap = false, dyndbg = false;
	struct port *ports;
	struct json_object *arr, *errs;
	char *items[MAX_PORTS];
	struct slot_list l_wakeup, l_d3cold, l_touch, l_wait;
	int n = 0, failed = 0, opt;

	while ((opt = next_opt(argc, argv, opts, false)) != -1) {
		switch (opt) {
		case OPT_SLOTS:
			slots = optarg;
			if ((n = parse_slots("--slots", slots, items, MAX_PORTS)) < 0)
				return 2;
			break;
		case OPT_PM_CAP:
			want_cap = true;
			break;
		case OPT_DYNDBG:
			dyndbg = true;
			break;
		case OPT_WAKEUP:
			wakeup = optarg;
			break;
		case OPT_D3COLD:
			d3cold = optarg;
			break;
		case OPT_HOLD:
			if (parse_double_opt("--hold", optarg, 0, TIMEOUT_MAX, &hold))
				return 2;
			break;
		case OPT_TOUCH:
			touch = optarg;
			break;
		case OPT_WAIT:
			wait = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_double_opt("--timeout", optarg, 0, TIMEOUT_MAX, &timeout))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (!slots) {
		fprintf(stderr, "labprobe pm: --slots is required\n");
		return 2;
	}
	ports = calloc(MAX_PORTS, sizeof(*ports));
	if (!ports)
		return 2;
	for (int i = 0; i < n; i++)
		scopy(ports[i].slot, sizeof(ports[i].slot), items[i]);
	/* every list is checked before anything is written */
	if (slot_list_parse(&l_wakeup, "--wakeup", wakeup, ports, n, wakeup_values, false) ||
	    slot_list_parse(&l_d3cold, "--d3cold", d3cold, ports, n, NULL, false) ||
	    slot_list_parse(&l_touch, "--touch", touch, ports, n, NULL, false) ||
	    slot_list_parse(&l_wait, "--wait", wait, ports, n, wait_values, true)) {
		free(ports);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		struct port *p = &ports[i];

		p->reached = -1;
		p->changes = json_object_new_array();
		p->bus = slot_bus(p->slot);
		if (p->bus < 0 || !slot_port(p->bus, p->dev, sizeof(p->dev)))
			p->dev[0] = '\0';
		else
			sample(p, 0);
	}
	errs = json_object_new_array();
	json_object_object_add(out, "pcie_port_pm_force", json_object_new_boolean(cmdline_has("pcie_port_pm=force")));
	json_object_object_add(out, "kmsg_last_seq_before", kmsg_last_seq_json());
	if (dyndbg && write_str("/sys/kernel/debug/dynamic_debug/control", "file drivers/pci/probe.c +p"))
		json_object_array_add(errs, json_object_new_string("could not enable dynamic debug of drivers/pci/probe.c"));
	failed |= each(ports, n, &l_wakeup, errs, do_wakeup);
	failed |= each(ports, n, &l_d3cold, errs, do_d3cold);
	if (hold > 0)
		watch(ports, n, t0, hold, false);
	failed |= each(ports, n, &l_touch, errs, do_touch);
	if (touch)
		json_object_object_add(out, "touched_at_s", json_object_new_double(now_mono() - t0));
	each(ports, n, &l_wait, errs, do_want);
	if (wait)
		watch(ports, n, t0, timeout, true);
	arr = json_object_new_array();
	for (int i = 0; i < n; i++) {
		if (ports[i].want[0] && ports[i].reached < 0)
			failed = 1;
		if (!ports[i].dev[0])
			failed = 1;
		json_object_array_add(arr, report(&ports[i], want_cap));
		json_object_put(ports[i].changes);
	}
	free(ports);
	json_object_object_add(out, "ports", arr);
	json_object_object_add(out, "errors", errs);
	json_object_object_add(out, "kmsg_last_seq", kmsg_last_seq_json());
	json_object_object_add(out, "elapsed_s", json_object_new_double(now_mono() - t0));
	json_object_object_add(out, "clock", json_object_new_string("CLOCK_MONOTONIC, polled every 10 ms"));
	return failed || json_object_array_length(errs) ? 1 : 0;
}
