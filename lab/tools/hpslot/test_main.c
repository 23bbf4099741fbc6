/* Runs every unit test; the last line is "N passed, M failed". */
#include "test_hpslot.h"

int t_passed, t_failed;

int main(void)
{
	test_regs();
	test_text();
	test_serials();
	test_args();
	test_storm();
	test_pcitree();
	test_lock();
	test_sbrwait();
	printf("%d passed, %d failed\n", t_passed, t_failed);
	return t_failed ? 1 : 0;
}
