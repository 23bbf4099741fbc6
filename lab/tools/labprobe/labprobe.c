#include "labprobe.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv, struct json_object *out);
	const char *help;
} cmds[] = {
	{ "smoke", cmd_smoke, "--release R --slots N,... [--drive SLOT=SERIAL]... [--hostname H] [--cloud-init-wait S]" },
	{ "findings", cmd_findings, "[--since-seq SEQ] [--context N]" },
	{ "arm", cmd_arm, "--dir D --slots N,... [--fio N,...] [--fio-runtime S] [--hung-task-timeout S]" },
	{ "collect", cmd_collect, "--dir D [--expect-gone N,...] [--expect-kept N,... [--observe S]] [--timeout S] [--fio-timeout S]" },
	{ "supervise", cmd_supervise, "--dir D [--fio-runtime S]   (tests: arm's fio supervisor in the foreground)" },
	{ "drives", cmd_drives, "--expect SLOT=SERIAL,... [--timeout S] [--verify-mib M]" },
	{ "pm", cmd_pm, "--slots N,... [--pm-cap] [--dyndbg] [--wakeup N=enabled|disabled,...] [--d3cold N,...] [--hold S] [--touch N,...] [--wait N=active|suspended,... [--timeout S]]" },
	{ "absent", cmd_absent, "--slot N [--expect-ones]" },
	{ "pme", cmd_pme, "--arm | --slots N,... [--wait-suspended S] [--expect-pmeie on|off] [--collect [--expect-pme-untouched]]" },
	{ "dpc", cmd_dpc, "--arm | --slots N,... [--collect [--expect-contained K] [--expect-no-recovery]] [--since-seq SEQ]" },
	{ "bars", cmd_bars, "--slots N,... [--expect-bound|--expect-present N,... [--timeout S]] [--since-seq SEQ]" },
	{ "view", cmd_view, "--slots N,... [--since-seq SEQ] [--expect SLOT=SERIAL|SLOT=empty,...] [--timeout S] [--log [LINES]]" },
	{ "rescan-loop", cmd_rescan_loop, "start [--interval-ms N] [--keep-lock-stat] | stop [--timeout S] [--class NAME]..." },
	{ "lockstat", cmd_lockstat, "[--reset] [CLASS...]" },
	{ "log-window", cmd_log_window, "start [--canary K --token T] | end --since-seq SEQ --boot-id ID [--token T] | after" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: labprobe COMMAND [ARGS]\n"
		   "Guest-side checks of pciehp-lab; prints one JSON object, exits 0 when all checks held,\n"
		   "1 when one failed (or the kernel log could not be read: \"error\"), 2 on bad arguments.\n"
		   "Options are spelled out in full (no abbreviations); --OPTION VALUE or --OPTION=VALUE.\n"
		   "LABPROBE_KMSG=FILE reads kernel log records from FILE instead of /dev/kmsg (tests).\n"
		   "LABPROBE_TRACE=FILE: collect reads the trace from FILE and kprobe_profile from FILE.profile,\n"
		   "and leaves tracefs alone (tests).\n"
		   "supervise (tests): LABPROBE_DEV=DIR holds the drives' nodes instead of /dev (required),\n"
		   "LABPROBE_SYS_BLOCK=DIR their NS/stat instead of /sys/block; fio is the one PATH finds.\n"
		   "rescan-loop and lockstat (tests): LABPROBE_RESCAN=FILE is written instead of /sys/bus/pci/rescan,\n"
		   "LABPROBE_RESCAN_STATE=DIR holds the loop's state, LABPROBE_LOCK_STAT=FILE is read instead of\n"
		   "/proc/lock_stat, LABPROBE_BOOT_ID=FILE instead of /proc/sys/kernel/random/boot_id.\n"
		   "log-window (tests): LABPROBE_LOG_STATE=DIR holds the window's state instead of /run/labprobe-log.\n\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  labprobe %s %s\n", cmds[i].name, cmds[i].help);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (!strcmp(argv[1], cmds[i].name)) {
			struct json_object *out = json_object_new_object();
			int ret;

			labprobe_cmd = cmds[i].name;
			json_object_object_add(out, "command", json_object_new_string(cmds[i].name));
			/* argv[0] is the command's name: getopt_long's argv (args.c) */
			ret = cmds[i].fn(argc - 1, argv + 1, out);
			if (ret == 2) {
				json_object_put(out);
				return 2;
			}
			/* a kernel log that could not be read fails any command that read it */
			if (kmsg_report(out) && ret == 0)
				ret = 1;
			json_object_object_add(out, "ok", json_object_new_boolean(ret == 0));
			puts(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN));
			json_object_put(out);
			return ret;
		}
	}
	fprintf(stderr, "labprobe: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
