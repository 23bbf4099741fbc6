/* Unit tests: the storm's seeded plan and the swap's device ids (pure). */
#include "hpslot.h"
#include "test_hpslot.h"

#include <stdlib.h>

static int plan(uint64_t seed, int count, long gap, int pct, bool *occ, int n, struct hp_storm_action *out)
{
	return hp_storm_plan(seed, count, gap, pct, occ, n, out);
}

void test_storm(void)
{
	enum { N = 200 };
	struct hp_storm_action p1[N], p2[N], p3[N];
	bool o1[4] = { true, true, false, false }, o2[4] = { true, true, false, false };
	bool o3[4] = { true, true, false, false };

	/* splitmix64 reference values (seed 0: the published first outputs) */
	uint64_t st = 0;
	CHECK(hp_rng_next(&st) == 0xe220a8397b1dcdafULL);
	CHECK(hp_rng_next(&st) == 0x6e789e6aa1b965f4ULL);
	CHECK(hp_rng_next(&st) == 0x06c45d188009454fULL);

	CHECK_STR(hp_storm_kind_name(HP_STORM_SURPRISE), "surprise");
	CHECK_STR(hp_storm_kind_name(HP_STORM_ORDERLY), "orderly");
	CHECK_STR(hp_storm_kind_name(HP_STORM_ADD), "add");

	/* reproducible: same seed and start, same plan */
	CHECK_EQ(plan(42, N, 1000, 25, o1, 4, p1), N);
	CHECK_EQ(plan(42, N, 1000, 25, o2, 4, p2), N);
	int same = 1;
	for (int i = 0; i < N; i++)
		same &= p1[i].slot_idx == p2[i].slot_idx && p1[i].kind == p2[i].kind && p1[i].gap_ms == p2[i].gap_ms;
	CHECK(same);
	for (int i = 0; i < 4; i++)
		CHECK(o1[i] == o2[i]);
	/* another seed, another plan */
	CHECK_EQ(plan(43, N, 1000, 25, o3, 4, p3), N);
	int differ = 0;
	for (int i = 0; i < N; i++)
		differ += p1[i].slot_idx != p3[i].slot_idx || p1[i].gap_ms != p3[i].gap_ms;
	CHECK(differ > N / 2);

	/* every action fits the simulated state; gaps in range; all kinds used */
	bool occ[4] = { true, true, false, false };
	int kinds[3] = { 0, 0, 0 }, slots[4] = { 0, 0, 0, 0 }, bad = 0;
	long gmax = 0;
	CHECK_EQ(plan(7, N, 500, 30, occ, 4, p1), N);
	bool sim[4] = { true, true, false, false };
	for (int i = 0; i < N; i++) {
		int s = p1[i].slot_idx;
		if (s < 0 || s >= 4 || p1[i].gap_ms < 0 || p1[i].gap_ms > 500) {
			bad++;
			continue;
		}
		if ((p1[i].kind == HP_STORM_ADD) == sim[s])
			bad++;
		sim[s] = p1[i].kind == HP_STORM_ADD;
		kinds[p1[i].kind]++;
		slots[s]++;
		if (p1[i].gap_ms > gmax)
			gmax = p1[i].gap_ms;
	}
	CHECK_EQ(bad, 0);
	CHECK(kinds[HP_STORM_SURPRISE] > 0 && kinds[HP_STORM_ORDERLY] > 0 && kinds[HP_STORM_ADD] > 0);
	CHECK(slots[0] > 0 && slots[1] > 0 && slots[2] > 0 && slots[3] > 0);
	CHECK(gmax > 250);
	for (int i = 0; i < 4; i++)
		CHECK(occ[i] == sim[i]);	/* the end state the plan expects */

	/* orderly share: 0 % and 100 % */
	bool a0[3] = { true, true, true }, a1[3] = { true, true, true };
	plan(9, N, 0, 0, a0, 3, p1);
	plan(9, N, 0, 100, a1, 3, p2);
	int orderly0 = 0, surprise100 = 0, gaps = 0;
	for (int i = 0; i < N; i++) {
		orderly0 += p1[i].kind == HP_STORM_ORDERLY;
		surprise100 += p2[i].kind == HP_STORM_SURPRISE;
		gaps += p1[i].gap_ms != 0;
	}
	CHECK_EQ(orderly0, 0);
	CHECK_EQ(surprise100, 0);
	CHECK_EQ(gaps, 0);	/* --max-gap-ms 0 */
	/* the draws do not depend on the percentage: same slots either way */
	same = 1;
	for (int i = 0; i < N; i++)
		same &= p1[i].slot_idx == p2[i].slot_idx;
	CHECK(same);

	/* one slot alternates removal and add */
	bool one[1] = { false };
	plan(5, 6, 10, 50, one, 1, p1);
	CHECK(p1[0].kind == HP_STORM_ADD && p1[1].kind != HP_STORM_ADD && p1[2].kind == HP_STORM_ADD);
	CHECK(one[0] == false);

	/* bad input */
	CHECK_EQ(plan(1, 3, 10, 101, occ, 4, p1), -1);
	CHECK_EQ(plan(1, 3, 10, -1, occ, 4, p1), -1);
	CHECK_EQ(plan(1, 3, -1, 10, occ, 4, p1), -1);
	CHECK_EQ(plan(1, 3, 10, 10, occ, 0, p1), -1);
	CHECK_EQ(plan(1, 0, 10, 10, occ, 4, p1), 0);

	/* swap device ids */
	char id[64];
	CHECK_EQ(hp_swap_device_id(3, "nvme-s3", " pci.3 nvme-s3", id, sizeof(id)), 0);
	CHECK_STR(id, "nvme-s3-b");
	CHECK_EQ(hp_swap_device_id(3, "nvme-s3-b", " pci.3 nvme-s3-b", id, sizeof(id)), 0);
	CHECK_STR(id, "nvme-s3");
	/* the old id of a just-yanked drive may still be listed; so may others */
	CHECK_EQ(hp_swap_device_id(3, "nvme-s3-b", " nvme-s3 nvme-s3-b", id, sizeof(id)), 0);
	CHECK_STR(id, "nvme-s3-c");
	CHECK_EQ(hp_swap_device_id(12, "", " nvme-s1 nvme-s12x", id, sizeof(id)), 0);
	CHECK_STR(id, "nvme-s12");
	CHECK_EQ(hp_swap_device_id(12, NULL, "nvme-s12", id, sizeof(id)), 0);
	CHECK_STR(id, "nvme-s12-b");
	CHECK_EQ(hp_swap_device_id(3, "nvme-s3", "", id, 4), -1);	/* too small */
}
