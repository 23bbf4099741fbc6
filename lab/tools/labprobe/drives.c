/* labprobe drives: the drives (re)appeared with the expected serials,
 * optionally write-verified.
 *
 *   labprobe drives --expect N=SERIAL,... [--timeout S] [--verify-mib M]
 *
 * drives waits for drives to (re)appear with the expected serials and
 * optionally write-verifies each with fio (one process, a job per drive:
 * fio.c's fio_argv). */
#include "labprobe.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* labprobe drives' fio: its JSON report and its log (errors by file) */
#define VERIFY_REPORT "/run/labprobe-verify.json"
#define VERIFY_LOG "/run/labprobe-verify.log"

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
