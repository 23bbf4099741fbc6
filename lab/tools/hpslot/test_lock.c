/* Unit tests: the lock file's domain names, wait and records. */
#include "hpslot.h"
#include "test_hpslot.h"

void test_lock(void)
{
	struct hp_lock_record r;
	char buf[HP_LOCK_NAME_MAX + 8], err[256];
	double w;

	/* domain names: refused rather than mapped */
	CHECK(hp_lock_name_invalid("lab1") == NULL);
	CHECK(hp_lock_name_invalid("pciehp-test-lab_1.2+x") == NULL);
	CHECK(hp_lock_name_invalid("a.") == NULL);
	CHECK_STR(hp_lock_name_invalid(""), "it is empty");
	CHECK_STR(hp_lock_name_invalid(NULL), "it is empty");
	CHECK_STR(hp_lock_name_invalid("."), "it starts with '.'");
	CHECK_STR(hp_lock_name_invalid(".."), "it starts with '.'");
	CHECK_STR(hp_lock_name_invalid(".hidden"), "it starts with '.'");
	CHECK_STR(hp_lock_name_invalid("a/b"), "it contains '/'");
	CHECK_STR(hp_lock_name_invalid("x/../../etc"), "it contains '/'");
	CHECK(hp_lock_name_invalid("a b") != NULL);
	CHECK(hp_lock_name_invalid("a\nb") != NULL);
	CHECK(hp_lock_name_invalid("d\xc3\xa9j\xc3\xa0") != NULL);
	CHECK(hp_lock_name_invalid("a*") != NULL && hp_lock_name_invalid("a:b") != NULL);
	memset(buf, 'a', sizeof(buf));
	buf[HP_LOCK_NAME_MAX] = 0;
	CHECK(hp_lock_name_invalid(buf) == NULL);
	buf[HP_LOCK_NAME_MAX] = 'a';
	buf[HP_LOCK_NAME_MAX + 1] = 0;
	CHECK(strstr(hp_lock_name_invalid(buf) ?: "", "longer than 200") != NULL);

	/* HPSLOT_LOCK_WAIT */
	CHECK_EQ(hp_parse_lock_wait(NULL, &w, err, sizeof(err)), 0);
	CHECK(w == 30);
	CHECK_EQ(hp_parse_lock_wait("", &w, err, sizeof(err)), 0);
	CHECK(w == 30);
	CHECK_EQ(hp_parse_lock_wait("1", &w, err, sizeof(err)), 0);
	CHECK(w == 1);
	CHECK_EQ(hp_parse_lock_wait("0", &w, err, sizeof(err)), 0);
	CHECK(w == 0);
	CHECK_EQ(hp_parse_lock_wait("0.5", &w, err, sizeof(err)), 0);
	CHECK(w == 0.5);
	CHECK_EQ(hp_parse_lock_wait("3600", &w, err, sizeof(err)), 0);
	CHECK_EQ(hp_parse_lock_wait("3601", &w, err, sizeof(err)), -1);
	CHECK(strstr(err, "HPSLOT_LOCK_WAIT: '3601' is not a number of seconds in 0..3600") != NULL);
	CHECK_EQ(hp_parse_lock_wait("-1", &w, err, sizeof(err)), -1);
	CHECK_EQ(hp_parse_lock_wait("soon", &w, err, sizeof(err)), -1);
	CHECK_EQ(hp_parse_lock_wait("1s", &w, err, sizeof(err)), -1);
	CHECK_EQ(hp_parse_lock_wait("nan", &w, err, sizeof(err)), -1);
	CHECK_EQ(hp_parse_lock_wait("inf", &w, err, sizeof(err)), -1);

	/* records: what hpslot writes reads back */
	char text[512];
	int n = hp_lock_holder_line(text, sizeof(text), 1234, "remove", 1700000000);
	CHECK_STR(text, "pid=1234 cmd=remove since=1700000000\n");
	CHECK_EQ(n, (int)strlen(text));
	n = hp_lock_pause_line(text + n, sizeof(text) - (size_t)n, 1234, 1700000005);
	CHECK_STR(text, "pid=1234 cmd=remove since=1700000000\npaused=1 pid=1234 since=1700000005\n");
	CHECK_EQ(hp_lock_pause_line(buf, 10, 1, 2), -1);
	CHECK_EQ(hp_lock_record_parse(text, &r), 2);
	CHECK_EQ(r.holder_pid, 1234);
	CHECK_STR(r.holder_cmd, "remove");
	CHECK_EQ(r.holder_since, 1700000000);
	CHECK(r.paused);
	CHECK_EQ(r.paused_pid, 1234);
	CHECK_EQ(r.paused_since, 1700000005);
	CHECK_STR(r.paused_line, "paused=1 pid=1234 since=1700000005");

	/* a pause line alone (left by a killed hpslot), no final newline */
	CHECK_EQ(hp_lock_record_parse("paused=1 pid=77 since=5", &r), 1);
	CHECK(r.paused && r.paused_pid == 77 && r.paused_since == 5 && r.holder_pid == 0);
	/* what a foreign holder may write; unknown keys ignored */
	CHECK_EQ(hp_lock_record_parse("pid=4321 cmd=test extra=1\n", &r), 1);
	CHECK(!r.paused && r.holder_pid == 4321 && r.holder_since == 0);
	CHECK_STR(r.holder_cmd, "test");
	/* nothing, rubbish, paused=0, bad numbers */
	CHECK_EQ(hp_lock_record_parse("", &r), 0);
	CHECK(!r.paused && !r.holder_pid);
	CHECK_EQ(hp_lock_record_parse("garbage\n\n==\n", &r), 0);
	CHECK_EQ(hp_lock_record_parse("paused=0 pid=1 since=1\n", &r), 1);
	CHECK(!r.paused && r.holder_pid == 1);
	CHECK_EQ(hp_lock_record_parse("paused=1 pid=-5 since=x\n", &r), 1);
	CHECK(r.paused && r.paused_pid == 0 && r.paused_since == 0);
	CHECK_EQ(hp_lock_record_parse("pid=99999999999999999999\n", &r), 1);
	CHECK_EQ(r.holder_pid, 0);
	CHECK_EQ(hp_lock_record_parse("pid=12\r\n", &r), 1);
	CHECK_EQ(r.holder_pid, 12);
}
