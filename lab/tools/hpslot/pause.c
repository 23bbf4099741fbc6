/* hpslot remove: one pause of the domain around config cycles (stop, save
 * 0xCF8 ... restore 0xCF8, cont; a guest in S3 is left asleep): pause_begin
 * and pause_end, used by the surprise and the orderly --cancel removal. */
#include "hpslot.h"

#include <string.h>

int pause_begin(struct hp_ctx *h, struct pause *ps, char *err, size_t len)
{
	char st[64];

	memset(ps, 0, sizeof(*ps));
	/* resume later only what was running: check right before stopping */
	if (!hp_qemu_running(h, st, sizeof(st)) && strcmp(st, "suspended")) {
		snprintf(err, len, "the domain is not running (QEMU status %s)", st);
		ps->not_running = true;
		return -1;
	}
	if (hp_lock(h, err, len))
		return -1;
	hp_signals_block(true);
	if (!strcmp(st, "suspended")) {
		/* S3: QEMU keeps the vCPUs stopped until system_wakeup; a
		 * stop/cont here would wake the guest without its reset */
		ps->asleep = true;
		ps->stop_real = hp_real_ns();
		ps->stop_sent = ps->stop_done = hp_mono_ns();
		if (hp_cf8_save(h, &ps->cf8, err, len))
			return -1;
		ps->cf8_saved = true;
		return 0;
	}
	ps->stop_real = hp_real_ns();
	ps->stop_sent = hp_mono_ns();
	if (hp_vm_stop(h, err, len)) {
		/* did it stop anyway (e.g. a libvirt timeout)? then resume it later */
		if (!hp_qemu_running(h, st, sizeof(st)) && !strcmp(st, "paused")) {
			ps->stopped = true;
			return -1;
		}
		hp_signals_block(false);
		hp_unlock();
		return -1;
	}
	ps->stop_done = hp_mono_ns();
	ps->stopped = true;
	if (hp_cf8_save(h, &ps->cf8, err, len))
		return -1;
	ps->cf8_saved = true;
	return 0;
}

/* Always resumes (if stopped). Returns -1 if restoring 0xCF8 or resuming failed. */
int pause_end(struct hp_ctx *h, struct pause *ps, char *err, size_t len)
{
	int rc = 0;
	char e[512];

	if (ps->cf8_saved && hp_cf8_set(h, ps->cf8, e, sizeof(e))) {
		snprintf(err, len, "restoring 0xCF8: %s", e);
		rc = -1;
	}
	if (ps->asleep) {
		ps->cont_sent = ps->cont_done = hp_mono_ns();
		ps->asleep = false;
		hp_signals_block(false);
		hp_unlock();
	}
	if (ps->stopped) {
		ps->cont_sent = hp_mono_ns();
		if (hp_vm_cont(h, e, sizeof(e))) {
			snprintf(err, len, "resuming: %s", e);
			rc = -1;
		} else {
			ps->stopped = false;
		}
		ps->cont_done = hp_mono_ns();
		hp_signals_block(false);
		hp_unlock();
	}
	return rc;
}
