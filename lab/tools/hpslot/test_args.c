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
	BAD("belong to `hpslot remove`", "status", "dom", "--timeout", "3");
	BAD("belong to `hpslot add`", "status", "dom", "--serial", "x");

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
	BAD("belong to `hpslot add`", "remove", "--surprise", "dom", "3", "--size", "5");
	BAD("unknown option '--yank'", "remove", "--yank", "dom", "3");
	/* "--" ends the options: "-5" is then a (bad) slot */
	BAD("'-5' is not a slot", "remove", "--surprise", "--", "dom", "-5");

	/* add */
	OK("add", "dom", "3");
	CHECK(a.cmd == HP_CMD_ADD && a.size_mib == 64 && !a.size_given && !a.serial && !a.node);
	OK("add", "dom", "3", "--serial", "lab1-s3-g7", "--size", "128", "--node=n3", "--wait", "2", "--force");
	CHECK_STR(a.serial, "lab1-s3-g7");
	CHECK(a.size_mib == 128 && a.size_given && a.wait == 2.0 && a.force);
	CHECK_STR(a.node, "n3");
	OK("add", "dom", "3", "4", "5");
	CHECK_EQ(a.nslots, 3);
	BAD("exactly one SLOT", "add", "dom", "3", "4", "--serial", "x");
	BAD("exactly one SLOT", "add", "dom", "3", "4", "--node", "x");
	BAD("no SLOT", "add", "dom");
	BAD("--serial '123456789012345678901'", "add", "dom", "3", "--serial", "123456789012345678901");
	BAD("--serial 'a b'", "add", "dom", "3", "--serial", "a b");
	BAD("--size '0'", "add", "dom", "3", "--size", "0");
	BAD("--size '12x'", "add", "dom", "3", "--size", "12x");
	BAD("--node '1abc'", "add", "dom", "3", "--node", "1abc");
	BAD("--node 'a b'", "add", "dom", "3", "--node", "a b");
	BAD("belong to `hpslot remove`", "add", "dom", "3", "--orderly");
	BAD("not a number of seconds", "add", "dom", "3", "--wait", "-1");
}
