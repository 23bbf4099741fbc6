/* Minimal unit-test harness for hpslot (no VM, no libvirt). */
#ifndef TEST_HPSLOT_H
#define TEST_HPSLOT_H

#include <stdio.h>
#include <string.h>

extern int t_passed, t_failed;

#define CHECK(cond) do { \
		if (cond) { t_passed++; } \
		else { t_failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
	} while (0)
#define CHECK_EQ(a, b) do { \
		long long a_ = (long long)(a), b_ = (long long)(b); \
		if (a_ == b_) { t_passed++; } \
		else { t_failed++; fprintf(stderr, "FAIL %s:%d: %s == %s: 0x%llx != 0x%llx\n", \
					   __FILE__, __LINE__, #a, #b, a_, b_); } \
	} while (0)
#define CHECK_STR(a, b) do { \
		const char *a_ = (a), *b_ = (b); \
		if (a_ && b_ && !strcmp(a_, b_)) { t_passed++; } \
		else { t_failed++; fprintf(stderr, "FAIL %s:%d: %s == \"%s\": got \"%s\"\n", \
					   __FILE__, __LINE__, #a, b_ ? b_ : "(null)", a_ ? a_ : "(null)"); } \
	} while (0)

void test_regs(void);
void test_text(void);
void test_serials(void);
void test_args(void);
void test_storm(void);
void test_pcitree(void);
void test_lock(void);
void test_sbrwait(void);

#endif
