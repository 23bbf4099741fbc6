/* remove --when-reset's wait (sbrwait.c) against a fake monitor and clock:
 * the port's x-sbr-count as a script of reads. */
#include "hpslot.h"
#include "test_hpslot.h"

#include <stdio.h>
#include <string.h>

struct fake {
	const long long *counts;	/* successive reads; -1: the read fails */
	int n, next;
	const char *fail_msg;
	long long now;			/* ns */
	long long read_ns, sleep_total;	/* a read costs this much time */
	int readies;
	unsigned long long ready_count;
	long long ready_at;
};

static int f_read(void *arg, unsigned long long *count, char *err, size_t len)
{
	struct fake *f = arg;
	/* past the script: the last value again */
	long long v = f->counts[f->next < f->n ? f->next : f->n - 1];

	f->next++;
	f->now += f->read_ns;
	if (v < 0) {
		snprintf(err, len, "%s", f->fail_msg);
		return -1;
	}
	*count = (unsigned long long)v;
	return 0;
}

static long long f_now(void *arg)
{
	return ((struct fake *)arg)->now;
}

static void f_sleep(void *arg, long ms)
{
	struct fake *f = arg;
	f->now += ms * 1000000LL;
	f->sleep_total += ms;
}

static void f_ready(void *arg, unsigned long long count)
{
	struct fake *f = arg;
	f->readies++;
	f->ready_count = count;
	f->ready_at = f->next;
}

static enum hp_sbr_result run(struct fake *f, long timeout_ms, long poll_ms, struct hp_sbr_wait *w)
{
	const struct hp_sbr_ops ops = { f_read, f_now, f_sleep, f_ready, f };
	return hp_sbr_wait(&ops, timeout_ms, poll_ms, w);
}

#define MS 1000000LL

void test_sbrwait(void)
{
	struct hp_sbr_wait w;

	/* the count grows on the 4th read: seen, after 3 polls of 2 ms + reads */
	{
		static const long long c[] = { 7, 7, 7, 8 };
		struct fake f = { .counts = c, .n = 4, .read_ns = 1 * MS };
		CHECK_EQ(run(&f, 1000, 2, &w), HP_SBR_SEEN);
		CHECK_EQ(w.result, HP_SBR_SEEN);
		CHECK_EQ(w.count_before, 7);
		CHECK_EQ(w.count_last, 8);
		CHECK_EQ(w.polls, 4);
		CHECK_EQ(f.readies, 1);		/* once, after the first read ... */
		CHECK_EQ(f.ready_count, 7);
		CHECK_EQ(f.ready_at, 1);	/* ... and before the second */
		/* t0 after the first read (1 ms); seen after 3 x (2 ms sleep + 1 ms read) */
		CHECK_EQ(w.t0_ns, 1 * MS);
		CHECK_EQ(w.seen_ns, 10 * MS);
		/* the last read with the old count was sent at 1+3+2 = 6 ms */
		CHECK_EQ(w.last_old_ns, 6 * MS);
		/* a yank 20 ms after seeing: at most 24 ms after the reset */
		CHECK(hp_sbr_to_yank_max_ms(&w, 30 * MS) == 24.0);
		CHECK(hp_sbr_in_reset(&w, 30 * MS));
		/* 102 ms is still inside Linux's reset, 102.001 is not */
		CHECK(hp_sbr_in_reset(&w, 6 * MS + 102 * MS));
		CHECK(!hp_sbr_in_reset(&w, 6 * MS + 102 * MS + 1000));
	}
	/* grown at the second read: the reset came after the first read was sent */
	{
		static const long long c[] = { 0, 2 };
		struct fake f = { .counts = c, .n = 2, .read_ns = 0 };
		CHECK_EQ(run(&f, 50, 2, &w), HP_SBR_SEEN);
		CHECK_EQ(w.count_before, 0);
		CHECK_EQ(w.count_last, 2);	/* two resets meanwhile: still seen */
		CHECK_EQ(w.last_old_ns, 0);
		CHECK_EQ(w.polls, 2);
	}
	/* no reset: timeout, after about timeout_ms of polling */
	{
		static const long long c[] = { 3 };
		struct fake f = { .counts = c, .n = 1, .read_ns = 1 * MS };
		CHECK_EQ(run(&f, 100, 2, &w), HP_SBR_TIMEOUT);
		CHECK_EQ(w.count_before, 3);
		CHECK_EQ(w.count_last, 3);
		CHECK(f.now - w.t0_ns >= 100 * MS && f.now - w.t0_ns < 104 * MS);
		CHECK_EQ(w.polls, 1 + 34);	/* 3 ms a poll */
		CHECK_EQ(w.seen_ns, 0);
		CHECK(!hp_sbr_in_reset(&w, f.now));
	}
	/* the first read fails (Debian's QEMU: no such property): the caller
	 * tells it apart from a later failure by first_read */
	{
		static const long long c[] = { -1 };
		struct fake f = { .counts = c, .n = 1, .fail_msg = "Property 'pcie-root-port.x-sbr-count' not found" };
		CHECK_EQ(run(&f, 100, 2, &w), HP_SBR_ERROR);
		CHECK(w.first_read);
		CHECK_EQ(w.polls, 0);
		CHECK_EQ(f.readies, 0);
		CHECK(strstr(w.err, "not found") != NULL);
	}
	/* a later read fails */
	{
		static const long long c[] = { 5, 5, -1 };
		struct fake f = { .counts = c, .n = 3, .fail_msg = "monitor gone" };
		CHECK_EQ(run(&f, 100, 2, &w), HP_SBR_ERROR);
		CHECK(!w.first_read);
		CHECK_EQ(f.readies, 1);
		CHECK_STR(w.err, "monitor gone");
	}
	/* the count went down: an error naming the property, not a reset */
	{
		static const long long c[] = { 5, 4 };
		struct fake f = { .counts = c, .n = 2 };
		CHECK_EQ(run(&f, 100, 2, &w), HP_SBR_ERROR);
		CHECK(strstr(w.err, "x-sbr-count went down from 5 to 4") != NULL);
	}
	/* the time limit counts from the first read, however slow that was */
	{
		static const long long c[] = { 1, 1, 2 };
		struct fake f = { .counts = c, .n = 3, .read_ns = 0, .now = 0 };
		/* a 1 ms limit: one poll after the first read still goes (2 ms sleep
		 * is checked after), the next check times out */
		CHECK_EQ(run(&f, 1, 2, &w), HP_SBR_TIMEOUT);
		CHECK_EQ(w.polls, 2);
	}
	/* poll_ms 0: no sleep between reads */
	{
		static const long long c[] = { 1, 1, 1, 2 };
		struct fake f = { .counts = c, .n = 4, .read_ns = 1 * MS };
		CHECK_EQ(run(&f, 100, 0, &w), HP_SBR_SEEN);
		CHECK_EQ(f.sleep_total, 0);
		CHECK_EQ(w.polls, 4);
	}
}
