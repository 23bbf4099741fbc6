/* Unit tests: command line handling. */
#include "hpslot.h"
#include "test_hpslot.h"

#include <stdarg.h>

static struct hp_args a;
static char err[512];

/* parse a NULL-terminated argument list (after the program name) */
static int parse(const char *first, ...)
{
	char *argv[64];
	int argc = 0;
	va_list ap;

	argv[argc++] = (char *)"hpslot";
	va_start(ap, first);
	for (const char *s = first; s && argc < 63; s = va_arg(ap, const char *))
		argv[argc++] = (char *)s;
	va_end(ap);
	argv[argc] = NULL;
	return hp_parse_args(argc, argv, &a, err, sizeof(err));
}

#define OK(...) CHECK_EQ(parse(__VA_ARGS__, NULL), 0)
#define BAD(needle, ...) do { \
		CHECK_EQ(parse(__VA_ARGS__, NULL), -1); \
		CHECK(strstr(err, needle) != NULL); \
	} while (0)

/* parse "hpslot" + the NULL-terminated lists given (at most 3) */
static int parse_parts(const char *const *p1, const char *const *p2, const char *const *p3)
{
	const char *const *parts[] = { p1, p2, p3 };
	char *argv[64];
	int argc = 0;

	argv[argc++] = (char *)"hpslot";
	for (int i = 0; i < 3; i++)
		for (const char *const *s = parts[i]; s && *s && argc < 63; s++)
			argv[argc++] = (char *)*s;
	argv[argc] = NULL;
	return hp_parse_args(argc, argv, &a, err, sizeof(err));
}

/* The command lines the lab's callers pass (playbooks/, tests/, docs/;
 * lab_hpslot is "hpslot -c URI --json"): the values they parse to. */
#define LAB "-c", "qemu+ssh://host/system", "--json"
static void test_callers(void)
{
	OK(LAB, "status", "lab1");
	CHECK(a.cmd == HP_CMD_STATUS && a.json && !a.help && a.nslots == 0);
	CHECK_STR(a.uri, "qemu+ssh://host/system");
	CHECK_STR(a.domain, "lab1");
	OK(LAB, "status", "lab1", "7");
	CHECK(a.nslots == 1 && a.slots[0].slot == 7);

	OK(LAB, "remove", "--surprise", "--wait-guest", "30", "lab1", "3", "4");
	CHECK(a.cmd == HP_CMD_REMOVE && a.mode == HP_MODE_SURPRISE && a.wait_guest == 30.0 && a.nslots == 2);
	CHECK(!a.cancel && a.timeout == 20.0 && a.quiet_ms == 0 && a.stagger_ms == 0 && a.when_masked_ms == 0);
	CHECK(a.after_mask_ms == 20 && a.slots[0].slot == 3 && a.slots[1].slot == 4);
	OK(LAB, "remove", "--surprise", "lab1", "3");
	CHECK(a.mode == HP_MODE_SURPRISE && a.wait_guest == 0 && a.nslots == 1);
	OK(LAB, "remove", "--orderly", "--timeout", "20", "lab1", "3");
	CHECK(a.mode == HP_MODE_ORDERLY && a.timeout == 20.0 && !a.cancel);
	OK(LAB, "remove", "--orderly", "--timeout", "30", "lab1", "2001", "2002");
	CHECK(a.timeout == 30.0 && a.nslots == 2 && a.slots[1].slot == 2002);
	OK(LAB, "remove", "--orderly", "--cancel", "lab1", "3");
	CHECK(a.mode == HP_MODE_ORDERLY && a.cancel && a.timeout == 20.0);
	OK(LAB, "remove", "--surprise", "--stagger-ms", "20", "lab1", "2001", "2000");
	CHECK(a.stagger_ms == 20 && a.nslots == 2 && a.slots[0].slot == 2001);
	/* aer-reset-storm-round.yml: --json twice, --quiet-ms on a stock QEMU */
	OK(LAB, "remove", "--json", "--surprise", "--when-masked", "5000", "--quiet-ms", "3000", "lab1", "3");
	CHECK(a.json && a.mode == HP_MODE_SURPRISE && a.when_masked_ms == 5000 && a.after_mask_ms == 20);
	CHECK(a.quiet_ms == 3000 && a.nslots == 1);
	OK(LAB, "remove", "--json", "--surprise", "--when-masked", "5000", "lab1", "3");
	CHECK(a.when_masked_ms == 5000 && a.quiet_ms == 0);
	/* ... and --when-reset on the lab's QEMU */
	OK(LAB, "remove", "--json", "--surprise", "--when-reset", "15000", "lab1", "3");
	CHECK(a.when_reset_ms == 15000 && a.after_reset_ms == 20 && a.when_masked_ms == 0 && a.quiet_ms == 0);

	OK(LAB, "add", "--wait", "30", "lab1", "3", "4", "5");
	CHECK(a.cmd == HP_CMD_ADD && a.wait == 30.0 && a.nslots == 3 && !a.force && a.nprops == 0);
	CHECK(a.size_mib == 64 && !a.size_given && !a.serial && !a.node);
	OK(LAB, "add", "--force", "--prop", "use-intel-id=true", "--node", "sleep-s3-2", "lab1", "3");
	CHECK(a.force && a.nprops == 1 && a.wait == 0 && a.nslots == 1);
	CHECK_STR(a.props[0], "use-intel-id=true");
	CHECK_STR(a.node, "sleep-s3-2");

	OK(LAB, "swap", "--delay-ms", "250", "--settle", "5", "lab1", "3");
	CHECK(a.cmd == HP_CMD_SWAP && a.delay_ms == 250 && a.settle == 5.0 && a.settle_given && !a.serial);
	OK(LAB, "swap", "--delay-ms", "0", "--settle", "0", "lab1", "3");
	CHECK(a.delay_ms == 0 && a.settle == 0.0 && a.settle_given);

	OK(LAB, "storm", "--seed", "1234567", "--count", "40", "--max-gap-ms", "1000", "--orderly-percent", "25",
	   "lab1", "1", "2", "3");
	CHECK(a.cmd == HP_CMD_STORM && a.seed == 1234567 && a.seed_given && a.count == 40 && a.nslots == 3);
	CHECK(a.max_gap_ms == 1000 && a.orderly_percent == 25 && a.wait == 30.0 && a.settle == 60.0);
	CHECK(!a.dry_run && !a.settle_given);
	/* storm.yml's replay line */
	OK("storm", "--dry-run", "--seed", "7", "--count", "10", "--max-gap-ms", "500", "--orderly-percent", "30",
	   "DOMAIN", "1", "2");
	CHECK(a.dry_run && !a.json && a.seed == 7 && a.count == 10 && a.max_gap_ms == 500 && a.orderly_percent == 30);
	CHECK_STR(a.uri, "qemu:///system");

	OK(LAB, "aer", "--error", "SDN", "lab1", "3");
	CHECK(a.cmd == HP_CMD_AER && !a.aer_correctable && a.nslots == 1);
	CHECK_STR(a.aer_error, "SDN");
	OK(LAB, "aer", "--error", "COMP_TIME", "lab1", "3");
	CHECK_STR(a.aer_error, "COMP_TIME");

	OK(LAB, "absent", "--reset", "lab1", "1", "2");
	CHECK(a.cmd == HP_CMD_ABSENT && a.absent_reset && a.nslots == 2);
	OK(LAB, "absent", "lab1", "1", "2");
	CHECK(!a.absent_reset && a.nslots == 2);

	/* docs/vm-and-hotplug-by-hand.md */
	OK("add", "--wait", "5", "pciehp-lab-1", "1", "2", "3", "4");
	CHECK(a.wait == 5.0 && a.nslots == 4 && !a.json);
	OK("swap", "--delay-ms", "500", "pciehp-lab-1", "2");
	CHECK(a.delay_ms == 500 && a.settle == 5.0 && !a.settle_given);
	OK("storm", "--seed", "7", "--count", "40", "pciehp-lab-1", "1", "2", "3", "4");
	CHECK(a.seed == 7 && a.count == 40 && a.max_gap_ms == 1000 && a.orderly_percent == 25);
	OK("--json", "status", "pciehp-lab-1");
	CHECK(a.json && a.cmd == HP_CMD_STATUS);
}

/* Each command refuses, with its message, an unknown option, an option of
 * another command, a missing value and a bad number -- also with --json
 * after it (then a.json is set) -- while its base line alone parses. */
static void test_refusals(void)
{
	static const struct {
		const char *base[8];
		const char *extra[4];
		const char *msg;
	} cases[] = {
		{ { "status", "dom" }, { "--bogus" }, "unknown option '--bogus' (see hpslot --help)" },
		{ { "status", "dom" }, { "--timeout", "3" },
		  "status: --timeout belongs to `hpslot remove`; it does not go with `hpslot status` "
		  "(see hpslot help status)" },
		{ { "status", "dom" }, { "-c" }, "option --connect needs a value" },
		{ { "status", "dom" }, { "--connect=" }, "--connect needs a libvirt URI" },

		{ { "remove", "--surprise", "dom", "3" }, { "--ord" }, "unknown option '--ord'" },
		{ { "remove", "--surprise", "dom", "3" }, { "--wait", "3" },
		  "remove: --wait belongs to `hpslot add` and `hpslot storm`; it does not go with `hpslot remove`" },
		{ { "remove", "--surprise", "dom", "3" }, { "--quiet-ms" }, "option --quiet-ms needs a value" },
		{ { "remove", "--surprise", "dom", "3" }, { "--quiet-ms", "1x" }, "--quiet-ms '1x': milliseconds, 1..60000" },
		{ { "remove", "--orderly", "dom", "3" }, { "--timeout=3601" },
		  "--timeout: '3601' is not a number of seconds in 0.1..3600" },

		{ { "add", "dom", "3" }, { "--sizes", "8" }, "unknown option '--sizes'" },
		{ { "add", "dom", "3" }, { "--delay-ms", "5" },
		  "add: --delay-ms belongs to `hpslot swap`; it does not go with `hpslot add`" },
		{ { "add", "dom", "3" }, { "--size" }, "option --size needs a value" },
		{ { "add", "dom", "3" }, { "--size", "12x" }, "--size '12x': a drive size in MiB, 1..1048576" },
		{ { "add", "dom", "3" }, { "--force=yes" }, "unknown option '--force=yes'" },

		{ { "swap", "dom", "3" }, { "--delay", "5" }, "unknown option '--delay'" },
		{ { "swap", "dom", "3" }, { "--force" },
		  "swap: --force belongs to `hpslot add`; it does not go with `hpslot swap` (see hpslot help swap)" },
		{ { "swap", "dom", "3" }, { "--delay-ms" }, "option --delay-ms needs a value" },
		{ { "swap", "dom", "3" }, { "--delay-ms", "1.5" }, "--delay-ms '1.5': milliseconds, 0..600000" },

		{ { "storm", "--seed", "1", "--count", "1", "dom", "1" }, { "-x" }, "unknown option '-x'" },
		{ { "storm", "--seed", "1", "--count", "1", "dom", "1" }, { "--reset" },
		  "storm: --reset belongs to `hpslot absent`; it does not go with `hpslot storm`" },
		{ { "storm", "--seed", "1", "--count", "1", "dom", "1" }, { "--max-gap-ms" },
		  "option --max-gap-ms needs a value" },
		{ { "storm", "--seed", "1", "--count", "1", "dom", "1" }, { "--count", "0x5" },
		  "--count '0x5': a number of actions, 1..100000" },
		{ { "storm", "--seed", "1", "--count", "1", "dom", "1" }, { "--seed", "1e3" },
		  "--seed '1e3': an unsigned 64-bit number" },

		{ { "aer", "--error", "SDN", "dom", "3" }, { "--correct" }, "unknown option '--correct'" },
		{ { "aer", "--error", "SDN", "dom", "3" }, { "--surprise" },
		  "aer: --surprise belongs to `hpslot remove`; it does not go with `hpslot aer`" },
		{ { "aer", "--error", "SDN", "dom", "3" }, { "--error" }, "option --error needs a value" },
		{ { "aer", "--error", "SDN", "dom", "3" }, { "--error", "0x123456789" }, "--error '0x123456789'" },

		{ { "absent", "dom" }, { "--resets" }, "unknown option '--resets'" },
		{ { "absent", "dom" }, { "--count", "3" },
		  "absent: --count belongs to `hpslot storm`; it does not go with `hpslot absent`" },
		{ { "absent", "dom" }, { "--connect" }, "option --connect needs a value" },
		{ { "absent", "dom" }, { "--reset=1" }, "unknown option '--reset=1'" },
	};
	static const char *const json[] = { "--json", NULL };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = parse_parts(cases[i].base, NULL, NULL);
		if (rc)
			fprintf(stderr, "case %zu: base line refused: %s\n", i, err);
		CHECK_EQ(rc, 0);
		CHECK(!a.json);
		CHECK_EQ(parse_parts(cases[i].base, cases[i].extra, NULL), -1);
		if (!strstr(err, cases[i].msg))
			fprintf(stderr, "case %zu: want \"%s\"\n  got \"%s\"\n", i, cases[i].msg, err);
		CHECK(strstr(err, cases[i].msg) != NULL);
		CHECK(!a.json);
		/* --json after the bad option: the same error, as JSON */
		CHECK_EQ(parse_parts(cases[i].base, cases[i].extra, json), -1);
		CHECK(strstr(err, cases[i].msg) != NULL);
		CHECK(a.json);
		/* the bad option before the command and its domain (a value
		 * missing only at the end: elsewhere the next word is its value) */
		if (strstr(cases[i].msg, "needs a value"))
			continue;
		CHECK_EQ(parse_parts(cases[i].extra, cases[i].base, NULL), -1);
		CHECK(strstr(err, cases[i].msg) != NULL);
	}
}

void test_args(void)
{
	/* slot specs */
	struct hp_slotspec s;
	CHECK_EQ(hp_parse_slotspec("3", &s), 0);
	CHECK_EQ(s.slot, 3);
	CHECK_STR(s.port, "");
	CHECK_EQ(hp_parse_slotspec("pci.12", &s), 0);
	CHECK_EQ(s.slot, -1);
	CHECK_STR(s.port, "pci.12");
	CHECK_EQ(hp_parse_slotspec("0", &s), 0);
	CHECK_EQ(hp_parse_slotspec("8191", &s), 0);
	CHECK_EQ(hp_parse_slotspec("8192", &s), -1);
	CHECK_EQ(hp_parse_slotspec("-1", &s), -1);
	CHECK_EQ(hp_parse_slotspec("3x", &s), -1);
	CHECK_EQ(hp_parse_slotspec("", &s), -1);
	CHECK_EQ(hp_parse_slotspec("pci.0", &s), -1);
	CHECK_EQ(hp_parse_slotspec("pci.", &s), -1);
	CHECK_EQ(hp_parse_slotspec("pcie.0", &s), -1);
	CHECK_EQ(hp_parse_slotspec("pci.3a", &s), -1);

	/* no command, unknown command, help */
	CHECK_EQ(parse(NULL), -1);
	CHECK(strstr(err, "no command") != NULL);
	BAD("unknown command 'frobnicate'", "frobnicate", "dom");
	OK("--help");
	CHECK(a.help && a.cmd == HP_CMD_NONE);
	OK("-h");
	CHECK(a.help);
	OK("remove", "--help");
	CHECK(a.help && a.cmd == HP_CMD_REMOVE);
	OK("help", "add");
	CHECK(a.help && a.cmd == HP_CMD_ADD);
	OK("help");
	CHECK(a.help && a.cmd == HP_CMD_NONE);
	BAD("unknown command", "help", "nope");

	/* status */
	OK("status", "dom");
	CHECK(a.cmd == HP_CMD_STATUS);
	CHECK_STR(a.domain, "dom");
	CHECK_STR(a.uri, "qemu:///system");
	CHECK(!a.json);
	CHECK_EQ(a.nslots, 0);
	OK("--json", "status", "dom", "3", "pci.4");
	CHECK(a.json);
	CHECK_EQ(a.nslots, 2);
	CHECK_EQ(a.slots[0].slot, 3);
	CHECK_STR(a.slots[1].port, "pci.4");
	BAD("no DOMAIN", "status");
	BAD("status: --timeout belongs to `hpslot remove`; it does not go with `hpslot status`",
	    "status", "dom", "--timeout", "3");
	BAD("status: --serial belongs to `hpslot add` and `hpslot swap`", "status", "dom", "--serial", "x");

	/* connection URI forms */
	OK("-c", "qemu:///session", "status", "dom");
	CHECK_STR(a.uri, "qemu:///session");
	OK("status", "--connect=test:///default", "dom");
	CHECK_STR(a.uri, "test:///default");
	OK("status", "dom", "--connect", "qemu+ssh://h/system");
	CHECK_STR(a.uri, "qemu+ssh://h/system");
	OK("-cqemu:///x", "status", "dom");
	CHECK_STR(a.uri, "qemu:///x");
	BAD("needs a value", "status", "dom", "-c");
	BAD("needs a libvirt URI", "status", "dom", "--connect=");

	/* remove */
	BAD("--orderly or --surprise", "remove", "dom", "3");
	BAD("no SLOT", "remove", "--surprise", "dom");
	OK("remove", "--surprise", "dom", "3", "4", "pci.7");
	CHECK(a.mode == HP_MODE_SURPRISE && a.nslots == 3);
	OK("remove", "dom", "3", "--orderly");
	CHECK(a.mode == HP_MODE_ORDERLY && !a.cancel);
	CHECK(a.timeout == 20.0);
	OK("remove", "--orderly", "--cancel", "--timeout", "7.5", "dom", "3");
	CHECK(a.cancel && a.timeout == 7.5);
	OK("remove", "--orderly", "--timeout=30", "dom", "3");
	CHECK(a.timeout == 30.0);
	BAD("exclude each other", "remove", "--orderly", "--surprise", "dom", "3");
	BAD("no --cancel", "remove", "--surprise", "--cancel", "dom", "3");
	BAD("no --cancel", "remove", "--surprise", "--timeout", "5", "dom", "3");
	BAD("not a number of seconds", "remove", "--orderly", "--timeout", "abc", "dom", "3");
	BAD("not a number of seconds", "remove", "--orderly", "--timeout", "0", "dom", "3");
	BAD("not a number of seconds", "remove", "--orderly", "--timeout", "nan", "dom", "3");
	BAD("is not a slot", "remove", "--orderly", "dom", "three");
	BAD("is not a slot", "remove", "--orderly", "dom", "pci.x");
	BAD("named twice", "remove", "--surprise", "dom", "3", "3");
	BAD("named twice", "remove", "--surprise", "dom", "pci.3", "pci.3");
	/* --stagger-ms: one pause a slot (a drive in a JBOF, then the JBOF) */
	OK("remove", "--surprise", "--stagger-ms", "20", "dom", "2001", "2000");
	CHECK(a.stagger_ms == 20 && a.nslots == 2 && a.slots[0].slot == 2001 && a.slots[1].slot == 2000);
	OK("remove", "--surprise", "dom", "2000");
	CHECK(a.stagger_ms == 0);
	BAD("--stagger-ms goes with remove --surprise", "remove", "--orderly", "--stagger-ms", "5", "dom", "3");
	BAD("--stagger-ms", "remove", "--surprise", "--stagger-ms", "-1", "dom", "3");
	BAD("--stagger-ms", "remove", "--surprise", "--stagger-ms", "60001", "dom", "3");
	BAD("add: --stagger-ms belongs to `hpslot remove`", "add", "dom", "3", "--stagger-ms", "5");
	BAD("remove: --size belongs to `hpslot add`; it does not go with `hpslot remove`",
	    "remove", "--surprise", "dom", "3", "--size", "5");
	BAD("unknown option '--yank'", "remove", "--yank", "dom", "3");
	/* "--" ends the options: "-5" is then a (bad) slot */
	BAD("'-5' is not a slot", "remove", "--surprise", "--", "dom", "-5");

	/* remove --surprise --quiet-ms */
	OK("remove", "--surprise", "--quiet-ms", "3000", "dom", "3");
	CHECK_EQ(a.quiet_ms, 3000);
	BAD("--quiet-ms goes with remove --surprise", "remove", "--orderly", "--quiet-ms", "10", "dom", "3");
	BAD("--quiet-ms", "remove", "--surprise", "--quiet-ms", "0", "dom", "3");
	BAD("add: --quiet-ms belongs to `hpslot remove`", "add", "--quiet-ms", "10", "dom", "3");
	/* remove --surprise --when-masked */
	OK("remove", "--surprise", "--when-masked", "5000", "dom", "3");
	CHECK_EQ(a.when_masked_ms, 5000);
	CHECK_EQ(a.after_mask_ms, 20);
	OK("remove", "--surprise", "--when-masked", "5000", "--after-mask-ms", "0", "dom", "3");
	CHECK_EQ(a.after_mask_ms, 0);
	BAD("exactly one SLOT", "remove", "--surprise", "--when-masked", "5000", "dom", "3", "4");
	BAD("exactly one SLOT", "remove", "--orderly", "--when-masked", "5000", "dom", "3");
	BAD("--after-mask-ms goes with --when-masked", "remove", "--surprise", "--after-mask-ms", "5", "dom", "3");
	BAD("--when-masked", "remove", "--surprise", "--when-masked", "0", "dom", "3");
	BAD("add: --when-masked belongs to `hpslot remove`", "add", "--when-masked", "10", "dom", "3");
	/* remove --surprise --when-reset */
	OK("remove", "--surprise", "--when-reset", "5000", "dom", "3");
	CHECK_EQ(a.when_reset_ms, 5000);
	CHECK_EQ(a.after_reset_ms, 20);
	CHECK_EQ(a.when_masked_ms, 0);
	OK("remove", "--surprise", "--when-reset", "5000", "--after-reset-ms", "0", "dom", "3");
	CHECK_EQ(a.after_reset_ms, 0);
	OK("remove", "--surprise", "--when-reset=600000", "--after-reset-ms=10000", "dom", "pci.3");
	CHECK(a.when_reset_ms == 600000 && a.after_reset_ms == 10000);
	CHECK_STR(a.slots[0].port, "pci.3");
	OK("remove", "--surprise", "dom", "3");
	CHECK(a.when_reset_ms == 0 && a.after_reset_ms == 20);
	BAD("--when-reset goes with remove --surprise of exactly one SLOT",
	    "remove", "--surprise", "--when-reset", "5000", "dom", "3", "4");
	BAD("--when-reset goes with remove --surprise of exactly one SLOT",
	    "remove", "--orderly", "--when-reset", "5000", "dom", "3");
	BAD("--after-reset-ms goes with --when-reset", "remove", "--surprise", "--after-reset-ms", "5", "dom", "3");
	BAD("--after-reset-ms goes with --when-reset",
	    "remove", "--surprise", "--when-masked", "100", "--after-reset-ms", "5", "dom", "3");
	BAD("--when-reset and --when-masked exclude each other",
	    "remove", "--surprise", "--when-reset", "100", "--when-masked", "100", "dom", "3");
	BAD("--when-reset", "remove", "--surprise", "--when-reset", "0", "dom", "3");
	BAD("--when-reset", "remove", "--surprise", "--when-reset", "600001", "dom", "3");
	BAD("--when-reset", "remove", "--surprise", "--when-reset", "soon", "dom", "3");
	BAD("--after-reset-ms", "remove", "--surprise", "--when-reset", "100", "--after-reset-ms", "-1", "dom", "3");
	BAD("--after-reset-ms", "remove", "--surprise", "--when-reset", "100", "--after-reset-ms", "10001", "dom", "3");
	BAD("add: --when-reset belongs to `hpslot remove`", "add", "--when-reset", "10", "dom", "3");
	BAD("swap: --after-reset-ms belongs to `hpslot remove`", "swap", "--after-reset-ms", "10", "dom", "3");

	/* add */
	OK("add", "dom", "3");
	CHECK(a.cmd == HP_CMD_ADD && a.size_mib == 64 && !a.size_given && !a.serial && !a.node);
	OK("add", "dom", "3", "--serial", "lab1-s3-g7", "--size", "128", "--node=n3", "--wait", "2", "--force");
	CHECK_STR(a.serial, "lab1-s3-g7");
	CHECK(a.size_mib == 128 && a.size_given && a.wait == 2.0 && a.force);
	CHECK_STR(a.node, "n3");
	OK("add", "dom", "3", "4", "5");
	CHECK_EQ(a.nslots, 3);
	OK("add", "dom", "3", "--prop", "use-intel-id=true", "--prop=mdts=5", "--force");
	CHECK_EQ(a.nprops, 2);
	CHECK_STR(a.props[0], "use-intel-id=true");
	CHECK_STR(a.props[1], "mdts=5");
	BAD("--prop 'use-intel-id': give KEY=VALUE", "add", "dom", "3", "--prop", "use-intel-id");
	BAD("set by hpslot", "add", "dom", "3", "--prop", "serial=x");
	BAD("VALUE is empty", "add", "dom", "3", "--prop", "mdts=");
	BAD("KEY is", "add", "dom", "3", "--prop", "Use=1");
	BAD("remove: --prop belongs to `hpslot add`", "remove", "--surprise", "dom", "3", "--prop", "a=1");
	{
		struct json_object *v = hp_prop_value("true");
		CHECK(json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v));
		json_object_put(v);
		v = hp_prop_value("42");
		CHECK(json_object_is_type(v, json_type_int) && json_object_get_int64(v) == 42);
		json_object_put(v);
		v = hp_prop_value("4x");
		CHECK(json_object_is_type(v, json_type_string));
		CHECK_STR(json_object_get_string(v), "4x");
		json_object_put(v);
	}
	BAD("exactly one SLOT", "add", "dom", "3", "4", "--serial", "x");
	BAD("exactly one SLOT", "add", "dom", "3", "4", "--node", "x");
	BAD("no SLOT", "add", "dom");
	BAD("--serial '123456789012345678901'", "add", "dom", "3", "--serial", "123456789012345678901");
	BAD("--serial 'a b'", "add", "dom", "3", "--serial", "a b");
	BAD("--size '0'", "add", "dom", "3", "--size", "0");
	BAD("--size '12x'", "add", "dom", "3", "--size", "12x");
	BAD("--node '1abc'", "add", "dom", "3", "--node", "1abc");
	BAD("--node 'a b'", "add", "dom", "3", "--node", "a b");
	BAD("add: --orderly belongs to `hpslot remove`", "add", "dom", "3", "--orderly");
	BAD("not a number of seconds", "add", "dom", "3", "--wait", "-1");
	/* add keeps refusing the new commands' options */
	BAD("--delay-ms belongs to `hpslot swap`", "add", "dom", "3", "--delay-ms", "5");
	BAD("--seed belongs to `hpslot storm`", "status", "dom", "--seed", "5");
	BAD("--settle belongs to `hpslot swap` and `hpslot storm`", "remove", "--surprise", "dom", "3",
	    "--settle", "2");
	BAD("add: --count belongs to `hpslot storm`", "add", "dom", "3", "--count=4");

	/* swap */
	OK("swap", "dom", "3");
	CHECK(a.cmd == HP_CMD_SWAP && a.nslots == 1 && a.slots[0].slot == 3);
	CHECK(a.delay_ms == 0 && a.settle == 5.0 && !a.serial);
	OK("swap", "--delay-ms", "250", "--serial", "lab1-s3-g9", "--settle=2.5", "dom", "pci.3");
	CHECK(a.delay_ms == 250 && a.settle == 2.5);
	CHECK_STR(a.serial, "lab1-s3-g9");
	CHECK_STR(a.slots[0].port, "pci.3");
	OK("--json", "swap", "dom", "3", "--delay-ms=0");
	CHECK(a.json && a.delay_ms == 0);
	OK("swap", "dom", "3", "--delay-ms", "600000", "--settle", "0");
	CHECK(a.delay_ms == 600000 && a.settle == 0);
	BAD("exactly one SLOT", "swap", "dom", "3", "4");
	BAD("no SLOT", "swap", "dom");
	BAD("no DOMAIN", "swap");
	BAD("--delay-ms '-1': milliseconds, 0..600000", "swap", "dom", "3", "--delay-ms", "-1");
	BAD("--delay-ms '600001'", "swap", "dom", "3", "--delay-ms", "600001");
	BAD("--delay-ms '1.5'", "swap", "dom", "3", "--delay-ms", "1.5");
	BAD("--delay-ms 'x'", "swap", "dom", "3", "--delay-ms", "x");
	BAD("option --delay-ms needs a value", "swap", "dom", "3", "--delay-ms");
	BAD("not a number of seconds", "swap", "dom", "3", "--settle", "-1");
	BAD("--serial 'a,b'", "swap", "dom", "3", "--serial", "a,b");
	BAD("--wait belongs to `hpslot add` and `hpslot storm`; it does not go with `hpslot swap`",
	    "swap", "dom", "3", "--wait", "2");
	BAD("--surprise belongs to `hpslot remove`; it does not go with `hpslot swap`",
	    "swap", "--surprise", "dom", "3");
	BAD("--size belongs to `hpslot add`; it does not go with `hpslot swap`",
	    "swap", "dom", "3", "--size", "8");
	BAD("--count belongs to `hpslot storm`; it does not go with `hpslot swap`",
	    "swap", "dom", "3", "--count", "8");
	BAD("'x3' is not a slot", "swap", "dom", "x3");

	/* storm */
	OK("storm", "--seed", "42", "--count", "40", "dom", "1", "2", "3");
	CHECK(a.cmd == HP_CMD_STORM && a.seed == 42 && a.seed_given && a.count == 40 && a.nslots == 3);
	CHECK(a.max_gap_ms == 1000 && a.orderly_percent == 25 && a.wait == 30.0 && a.settle == 60.0);
	CHECK(!a.dry_run);
	OK("storm", "--seed=0x10", "--count=1", "--max-gap-ms", "0", "--orderly-percent", "100", "--wait", "5",
	   "--settle", "7", "--dry-run", "dom", "pci.1");
	CHECK(a.seed == 16 && a.count == 1 && a.max_gap_ms == 0 && a.orderly_percent == 100);
	CHECK(a.wait == 5.0 && a.settle == 7.0 && a.dry_run);
	OK("storm", "--seed", "18446744073709551615", "--count", "100000", "dom", "1");
	CHECK(a.seed == 18446744073709551615ULL && a.count == 100000);
	OK("storm", "--seed", "0", "--count", "2", "--orderly-percent", "0", "dom", "1");
	CHECK(a.seed == 0 && a.seed_given && a.orderly_percent == 0);
	BAD("--seed N is required", "storm", "--count", "4", "dom", "1");
	BAD("--count K is required", "storm", "--seed", "4", "dom", "1");
	BAD("no SLOT", "storm", "--seed", "4", "--count", "4", "dom");
	BAD("--seed '-1'", "storm", "--seed", "-1", "--count", "4", "dom", "1");
	BAD("--seed '18446744073709551616'",
	    "storm", "--seed", "18446744073709551616", "--count", "4", "dom", "1");
	BAD("--seed 'abc'", "storm", "--seed", "abc", "--count", "4", "dom", "1");
	BAD("--seed ''", "storm", "--seed=", "--count", "4", "dom", "1");
	BAD("--count '0'", "storm", "--seed", "1", "--count", "0", "dom", "1");
	BAD("--count '100001'", "storm", "--seed", "1", "--count", "100001", "dom", "1");
	BAD("--max-gap-ms '-5'", "storm", "--seed", "1", "--count", "1", "--max-gap-ms", "-5", "dom", "1");
	BAD("--orderly-percent '101': a percentage, 0..100", "storm", "--seed", "1", "--count", "1",
	    "--orderly-percent", "101", "dom", "1");
	BAD("--serial belongs to `hpslot add` and `hpslot swap`; it does not go with `hpslot storm`",
	    "storm", "--seed", "1", "--count", "1",
	    "--serial", "x", "dom", "1");
	BAD("--delay-ms belongs to `hpslot swap`; it does not go with `hpslot storm`",
	    "storm", "--seed", "1", "--count", "1",
	    "--delay-ms", "1", "dom", "1");
	BAD("--timeout belongs to `hpslot remove`; it does not go with `hpslot storm`",
	    "storm", "--seed", "1", "--count", "1",
	    "--timeout", "1", "dom", "1");
	BAD("named twice", "storm", "--seed", "1", "--count", "1", "dom", "1", "1");
	BAD("add: --dry-run belongs to `hpslot storm`", "add", "dom", "1", "--dry-run");
	BAD("--settle: 'x' is not a number of seconds",
	    "storm", "--seed", "1", "--count", "1", "dom", "1", "--settle=x");

	/* aer */
	OK("aer", "--error", "COMP_TIME", "dom", "3");
	CHECK(a.cmd == HP_CMD_AER && !strcmp(a.aer_error, "COMP_TIME") && !a.aer_correctable && a.nslots == 1);
	OK("aer", "--error=0x20", "--correctable", "dom", "pci.2", "4");
	CHECK(!strcmp(a.aer_error, "0x20") && a.aer_correctable && a.nslots == 2);
	BAD("aer: --error NAME is required", "aer", "dom", "3");
	BAD("--error 'comp_time'", "aer", "--error", "comp_time", "dom", "3");
	BAD("--error '0x'", "aer", "--error", "0x", "dom", "3");
	BAD("--error 'SDN;quit'", "aer", "--error", "SDN;quit", "dom", "3");
	BAD("aer: no SLOT given", "aer", "--error", "SDN", "dom");
	BAD("remove: --error belongs to `hpslot aer`", "remove", "--surprise", "--error", "SDN",
	    "dom", "3");
	BAD("--seed belongs to `hpslot storm`; it does not go with `hpslot aer`",
	    "aer", "--error", "SDN", "--seed", "1", "dom", "3");
	CHECK(hp_valid_aer_error("SDN") && hp_valid_aer_error("0xFFFF") && !hp_valid_aer_error("0x123456789"));
	CHECK(!hp_valid_aer_error("") && !hp_valid_aer_error("_X") && !hp_valid_aer_error("SDN "));

	/* absent: SLOTs optional (all ports), --reset its only option */
	OK("absent", "dom");
	CHECK(a.cmd == HP_CMD_ABSENT && a.nslots == 0 && !a.absent_reset);
	CHECK_STR(hp_cmd_name(HP_CMD_ABSENT), "absent");
	OK("--json", "absent", "dom", "1", "pci.2", "--reset");
	CHECK(a.json && a.absent_reset && a.nslots == 2 && a.slots[0].slot == 1);
	CHECK_STR(a.slots[1].port, "pci.2");
	OK("absent", "--reset", "dom");
	CHECK(a.absent_reset && a.nslots == 0);
	BAD("absent: no DOMAIN", "absent");
	BAD("named twice", "absent", "dom", "1", "1");
	BAD("is not a slot", "absent", "dom", "one");
	BAD("--surprise belongs to `hpslot remove`; it does not go with `hpslot absent`",
	    "absent", "--surprise", "dom");
	BAD("--seed belongs to `hpslot storm`; it does not go with `hpslot absent`",
	    "absent", "dom", "--seed", "1");
	BAD("status: --reset belongs to `hpslot absent`", "status", "dom", "--reset");
	BAD("remove: --reset belongs to `hpslot absent`", "remove", "--surprise", "dom", "3", "--reset");
	BAD("--reset belongs to `hpslot absent`; it does not go with `hpslot aer`",
	    "aer", "--error", "SDN", "dom", "3", "--reset");
	BAD("unknown option '--reset=1'", "absent", "dom", "--reset=1");
	BAD("storm, aer or absent", "frobnicate", "dom");
	OK("help", "absent");
	CHECK(a.help && a.cmd == HP_CMD_ABSENT);

	/* --json counts wherever it stands, also after a bad option: main
	 * prints the error as JSON; the first error is the one reported */
	BAD("unknown option '--bogus'", "status", "dom", "--bogus", "--json");
	CHECK(a.json);
	BAD("unknown option '--bogus'", "status", "dom", "--bogus");
	CHECK(!a.json);
	BAD("--delay-ms 'x': milliseconds, 0..600000", "swap", "dom", "3", "--delay-ms", "x", "--json");
	CHECK(a.json);
	BAD("not a number of seconds", "remove", "--orderly", "--timeout", "soon", "dom", "3", "--json");
	CHECK(a.json);
	BAD("--orderly and --surprise exclude each other", "remove", "--orderly", "--surprise", "--json", "dom", "3");
	CHECK(a.json);
	BAD("status: --seed belongs to `hpslot storm`", "status", "dom", "--seed", "1", "--json");
	CHECK(a.json);
	BAD("unknown option '--bogus'", "status", "dom", "--bogus", "--timeout", "x", "--yank", "--json");
	CHECK(a.json);
	BAD("unknown option '-x'", "-x", "status", "dom", "--json");
	CHECK(a.json);
	BAD("unknown command 'frob'", "frob", "dom", "--json");
	CHECK(a.json);
	BAD("--size '0'", "add", "dom", "x", "--size", "0", "--json");
	CHECK(a.json);

	/* a value never starts with "--": the option lacks its value, and
	 * what follows is read as an option (or as "--") */
	BAD("option --delay-ms needs a value", "swap", "dom", "3", "--delay-ms", "--json");
	CHECK(a.json);
	BAD("option --connect needs a value", "-c", "--json", "status", "dom");
	CHECK(a.json);
	BAD("option --serial needs a value", "add", "dom", "3", "--serial", "--force");
	CHECK(a.force);
	BAD("option --timeout needs a value", "remove", "--orderly", "--timeout", "--", "dom", "3");
	BAD("option --settle needs a value", "--json", "storm", "--seed", "1", "--count", "1", "--settle", "--seed=2",
	    "dom", "1");
	CHECK_EQ(a.seed, 2);
	BAD("--wait: '-1' is not a number of seconds", "add", "dom", "3", "--wait", "-1");

	/* help for the new commands */
	OK("help", "swap");
	CHECK(a.help && a.cmd == HP_CMD_SWAP);
	OK("storm", "--help");
	CHECK(a.help && a.cmd == HP_CMD_STORM);

	test_callers();
	test_refusals();
}
