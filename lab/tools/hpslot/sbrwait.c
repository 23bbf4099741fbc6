/* remove --when-reset: wait for a Secondary Bus Reset of the slot's port.
 *
 * The lab's QEMU counts the resets the guest asserts at a PCIe root or
 * downstream port (x-sbr-count, qemu/patches/0011). A reset lasts 2 ms
 * (Linux), too short to catch by polling Bridge Control; the count stays.
 * Pure: the monitor and the clock are callbacks (hp_sbr_ops). */
#include "hpslot.h"

#include <string.h>

enum hp_sbr_result hp_sbr_wait(const struct hp_sbr_ops *ops, long timeout_ms, long poll_ms, struct hp_sbr_wait *w)
{
	unsigned long long c;
	long long sent;

	memset(w, 0, sizeof(*w));
	w->t0_ns = ops->now_ns(ops->arg);
	if (ops->read(ops->arg, &w->count_before, w->err, sizeof(w->err))) {
		w->first_read = true;
		return w->result = HP_SBR_ERROR;
	}
	w->polls = 1;
	w->count_last = w->count_before;
	w->last_old_ns = w->t0_ns;
	/* the time limit counts from the first read: a slow monitor before it
	 * must not eat the caller's wait */
	w->t0_ns = ops->now_ns(ops->arg);
	if (ops->ready)
		ops->ready(ops->arg, w->count_before);
	for (;;) {
		if (ops->now_ns(ops->arg) - w->t0_ns >= timeout_ms * 1000000LL)
			return w->result = HP_SBR_TIMEOUT;
		if (poll_ms > 0)
			ops->sleep_ms(ops->arg, poll_ms);
		sent = ops->now_ns(ops->arg);
		if (ops->read(ops->arg, &c, w->err, sizeof(w->err)))
			return w->result = HP_SBR_ERROR;
		w->polls++;
		w->count_last = c;
		if (c > w->count_before) {
			w->seen_ns = ops->now_ns(ops->arg);
			return w->result = HP_SBR_SEEN;
		}
		if (c < w->count_before) {
			snprintf(w->err, sizeof(w->err), "%s went down from %llu to %llu (was the port "
				 "re-created?)", HP_SBR_PROP, w->count_before, c);
			return w->result = HP_SBR_ERROR;
		}
		w->last_old_ns = sent;
	}
}

double hp_sbr_to_yank_max_ms(const struct hp_sbr_wait *w, long long yank_ns)
{
	return (yank_ns - w->last_old_ns) / 1e6;
}

bool hp_sbr_in_reset(const struct hp_sbr_wait *w, long long yank_ns)
{
	return w->result == HP_SBR_SEEN && yank_ns - w->last_old_ns <= HP_SBR_IN_RESET_MS * 1000000LL;
}
