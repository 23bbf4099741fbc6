/* hpslot remove --orderly [--cancel]: press the attention button through
 * device_del and wait for the guest to finish, or (--cancel) have the guest
 * cancel the removal with a second press in its 5 s window. */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

struct ord {
	bool pressed, gone, abpe_cleared, abpe_restored, blinked, second, kept;
	uint16_t ctl0;
	long long del_real, del_mono, gone_mono;
	char err[512];
};

static int restore_abpe(struct hp_ctx *h, struct hp_port **ports, struct ord *s, int n, double *paused,
			char *err, size_t len)
{
	struct pause ps;
	int rc = 0;

	if (pause_begin(h, &ps, err, len)) {
		if (ps.stopped)
			pause_end(h, &ps, err + strlen(err), len - strlen(err));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		uint16_t c, st;
		if (!s[i].abpe_cleared || s[i].abpe_restored)
			continue;
		if (slot_read(h, ports[i], &c, &st, s[i].err, sizeof(s[i].err)) ||
		    slot_write_here(h, ports[i], c | SLTCTL_ABPE, s[i].err, sizeof(s[i].err))) {
			rc = -1;
			continue;
		}
		s[i].abpe_restored = true;
	}
	if (pause_end(h, &ps, err, len))
		rc = -1;
	*paused += (ps.cont_done - ps.stop_sent) / 1e9;
	return rc;
}

int orderly(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *t,
	    struct hp_port **ports)
{
	struct ord *s = calloc((size_t)a->nslots, sizeof(*s));
	char err[512] = "";
	int rc = HP_EXIT_OK, pending = 0;
	double paused = 0;	/* seconds the VM was stopped after the first press */
	long long last_press = 0;
	long long t_before = hp_real_ns();

	json_object_object_add(o->root, "timeout_s", hp_num(a->timeout, 1));
	json_object_object_add(o->root, "cancel", json_object_new_boolean(a->cancel));

	if (a->cancel) {
		/* Hold the first press back from the guest: clear Attention Button
		 * Pressed Enable so QEMU only latches ABP (see `hpslot remove --help`). */
		struct pause ps;
		if (pause_begin(h, &ps, err, sizeof(err))) {
			if (ps.stopped)
				pause_end(h, &ps, err + strlen(err), sizeof(err) - strlen(err));
			hp_fail(o, "could not pause the domain: %s; nothing changed", err);
			free(s);
			return HP_EXIT_FAILED;
		}
		for (int i = 0; i < a->nslots; i++) {
			uint16_t st;
			if (slot_read(h, ports[i], &s[i].ctl0, &st, s[i].err, sizeof(s[i].err)))
				continue;
			if (!(s[i].ctl0 & SLTCTL_ABPE)) {
				snprintf(s[i].err, sizeof(s[i].err), "the guest has not enabled attention button "
					 "interrupts (Slot Control 0x%04x): it cannot cancel", s[i].ctl0);
				continue;
			}
			if (slot_write_here(h, ports[i], s[i].ctl0 & ~SLTCTL_ABPE, s[i].err, sizeof(s[i].err))) {
				char e2[256];
				slot_write(h, ports[i], s[i].ctl0, e2, sizeof(e2));
				continue;
			}
			s[i].abpe_cleared = true;
		}
		if (pause_end(h, &ps, err, sizeof(err)))
			hp_fail(o, "%s", err);
		bool all = true;
		for (int i = 0; i < a->nslots; i++)
			all = all && s[i].abpe_cleared;
		if (!all) {
			char e2[512];
			restore_abpe(h, ports, s, a->nslots, &paused, e2, sizeof(e2));
			for (int i = 0; i < a->nslots; i++)
				if (s[i].err[0])
					hp_fail(o, "slot %d: %s", ports[i]->slot, s[i].err);
			hp_fail(o, "cancel not possible; Slot Control restored, nothing removed");
			free(s);
			return HP_EXIT_FAILED;
		}
	}

	/* first press */
	for (int i = 0; i < a->nslots; i++) {
		s[i].del_real = hp_real_ns();
		s[i].del_mono = hp_mono_ns();
		if (device_del(h, dev_ref(ports[i]), s[i].err, sizeof(s[i].err)))
			continue;
		s[i].pressed = true;
		pending++;
	}
	long long t0 = hp_mono_ns();

	if (a->cancel) {
		/* let the guest see the press 2 s later, so its 5 s window outlasts
		 * QEMU's 5 s refusal of a second device_del */
		hp_sleep(2.0 - (hp_mono_ns() - t0) / 1e9);
		char e2[512];
		if (restore_abpe(h, ports, s, a->nslots, &paused, e2, sizeof(e2)))
			hp_fail(o, "restoring Attention Button Pressed Enable: %s", e2);
		long long tg = hp_mono_ns();
		/* wait until the guest blinks */
		for (double w0 = hp_mono(); hp_mono() - w0 < 2.5;) {
			int blinking = 0;
			for (int i = 0; i < a->nslots; i++) {
				char e3[256];
				if (!s[i].pressed || s[i].blinked)
					continue;
				if (!hp_port_read_regs(h, t, ports[i], e3, sizeof(e3)) &&
				    hp_pic(ports[i]->sltctl) == SLTCTL_IND_BLINK)
					s[i].blinked = true;
			}
			for (int i = 0; i < a->nslots; i++)
				blinking += !s[i].pressed || s[i].blinked;
			if (blinking == a->nslots)
				break;
			hp_sleep(0.05);
		}
		/* QEMU refuses another device_del for 5 s of guest (virtual) time */
		double due = 5.0 + paused + 0.25;
		hp_sleep(due - (hp_mono_ns() - t0) / 1e9);
		int todo = 0;
		for (int i = 0; i < a->nslots; i++)
			todo += s[i].pressed && s[i].blinked;
		while (todo > 0 && (hp_mono_ns() - tg) / 1e9 < 4.3) {
			struct pause ps;
			bool retry = false;
			if (pause_begin(h, &ps, err, sizeof(err))) {
				if (ps.stopped)
					pause_end(h, &ps, err + strlen(err), sizeof(err) - strlen(err));
				break;
			}
			for (int i = 0; i < a->nslots; i++) {
				uint16_t c, st;
				char e3[512];
				if (!s[i].pressed || !s[i].blinked || s[i].second)
					continue;
				if (slot_read(h, ports[i], &c, &st, s[i].err, sizeof(s[i].err)))
					continue;
				if (hp_pic(c) != SLTCTL_IND_BLINK) {
					snprintf(s[i].err, sizeof(s[i].err), "the guest stopped blinking before the "
						 "second press (Slot Control 0x%04x)", c);
					s[i].second = true;	/* give up on this one */
					todo--;
					continue;
				}
				/* QEMU refuses device_del while the indicator blinks */
				if (slot_write_here(h, ports[i], hp_sltctl_with_pic(c, SLTCTL_IND_ON), s[i].err,
						    sizeof(s[i].err)))
					continue;
				if (device_del(h, dev_ref(ports[i]), e3, sizeof(e3))) {
					char e4[256];
					slot_write(h, ports[i], c, e4, sizeof(e4));	/* back to blink */
					if (strstr(e3, "already in the process")) {
						retry = true;
					} else {
						snprintf(s[i].err, sizeof(s[i].err), "second press: %.480s", e3);
						s[i].second = true;
						todo--;
					}
					continue;
				}
				s[i].second = true;
				s[i].kept = true;	/* verified below */
				last_press = hp_mono_ns();
				todo--;
			}
			if (pause_end(h, &ps, err, sizeof(err)))
				hp_fail(o, "%s", err);
			paused += (ps.cont_done - ps.stop_sent) / 1e9;
			if (!retry)
				break;
			hp_sleep(0.1);
		}
		/* after the guest's window (+ its 1 s power-off wait) the drive must still be there */
		hp_sleep(5.0 + 1.5 - (hp_mono_ns() - tg) / 1e9);
		/* and until QEMU accepts a device_del of the drive again (5 s after
		 * the second press), so the slot is back to normal when we return */
		if (last_press)
			hp_sleep(5.1 - (hp_mono_ns() - last_press) / 1e9);
		for (int i = 0; i < a->nslots; i++) {
			char e3[256];
			struct json_object *j = slot_base(ports[i]);
			int present = device_present(h, ports[i]);
			hp_port_read_regs(h, t, ports[i], e3, sizeof(e3));
			struct hp_port *p = ports[i];
			bool ok = s[i].kept && present == 1 && (p->sltsta & SLTSTA_PDS) && hp_power_on(p->sltctl) &&
				  hp_pic(p->sltctl) == SLTCTL_IND_ON;
			json_object_object_add(j, "cancelled", json_object_new_boolean(ok));
			json_object_object_add(j, "second_press", json_object_new_boolean(s[i].kept));
			json_object_object_add(j, "guest_blinked", json_object_new_boolean(s[i].blinked));
			json_object_object_add(j, "sltctl_after", hp_hex16(p->sltctl));
			json_object_object_add(j, "sltsta_after", hp_hex16(p->sltsta));
			set_str(j, "result", ok ? "kept" : present == 0 ? "removed" : "failed");
			if (!ok && !s[i].err[0])
				snprintf(s[i].err, sizeof(s[i].err), "after the window: device %s, Slot Control "
					 "0x%04x, Slot Status 0x%04x", present == 1 ? "present" : present == 0 ?
					 "gone" : "unknown", p->sltctl, p->sltsta);
			if (s[i].err[0]) {
				set_str(j, "error", s[i].err);
				fprintf(stderr, "hpslot: slot %d: %s\n", p->slot, s[i].err);
			}
			if (!ok)
				rc = HP_EXIT_FAILED;
			json_object_array_add(o->slots, j);
			hp_say(o, "slot %-4d %-7s %s %s (Slot Control 0x%04x, Slot Status 0x%04x)\n", p->slot, p->id,
			       dev_ref(p), ok ? "kept: the guest cancelled the removal" : "NOT kept", p->sltctl, p->sltsta);
		}
		json_object_object_add(o->root, "paused_ms", hp_num(paused * 1000, 3));
		if (rc)
			hp_fail(o, "the removal was not cancelled in every slot");
		free(s);
		return rc;
	}

	/* wait for DEVICE_DELETED / the device to vanish */
	while (pending > 0 && (hp_mono_ns() - t0) / 1e9 < a->timeout) {
		hp_sleep(0.1);
		for (int i = 0; i < a->nslots; i++) {
			if (!s[i].pressed || s[i].gone)
				continue;
			if (device_present(h, ports[i]) == 0) {
				s[i].gone = true;
				s[i].gone_mono = hp_mono_ns();
				pending--;
			}
		}
	}
	hp_sleep(0.05);		/* let the last events arrive */
	for (int i = 0; i < a->nslots; i++) {
		struct hp_port *p = ports[i];
		struct json_object *j = slot_base(p);
		double after = -1;
		if (s[i].gone) {
			long long ev = event_ts_ns(h, "DEVICE_DELETED", p->drive.id[0] ? p->drive.id : p->drive.path,
						   t_before);
			after = ev > 0 ? (ev - s[i].del_real) / 1e9 : (s[i].gone_mono - s[i].del_mono) / 1e9;
			json_object_object_add(j, "device_deleted_ns", ev > 0 ? json_object_new_int64(ev) : NULL);
			json_object_object_add(j, "deleted_after_s", hp_num(after, 3));
			json_object_object_add(j, "timing_from", json_object_new_string(ev > 0 ? "event" : "poll"));
		} else {
			json_object_object_add(j, "deleted_after_s", NULL);
		}
		json_object_object_add(j, "device_del_ns", json_object_new_int64(s[i].del_real));
		const char *result = s[i].gone ? "removed" : s[i].pressed ? "timeout" : "failed";
		set_str(j, "result", result);
		if (!s[i].gone && s[i].pressed)
			snprintf(s[i].err, sizeof(s[i].err), "device %s still present %.1f s after device_del "
				 "(the guest has not finished the removal; it may still do so later)", dev_ref(p), a->timeout);
		if (s[i].err[0]) {
			set_str(j, "error", s[i].err);
			fprintf(stderr, "hpslot: slot %d: %s\n", p->slot, s[i].err);
			rc = HP_EXIT_FAILED;
		}
		json_object_array_add(o->slots, j);
		if (s[i].gone)
			hp_say(o, "slot %-4d %-7s %s removed %.2f s after device_del\n", p->slot, p->id, dev_ref(p), after);
		else
			hp_say(o, "slot %-4d %-7s %s %s\n", p->slot, p->id, dev_ref(p), result);
	}
	if (rc)
		hp_fail(o, "not every drive was removed");
	free(s);
	return rc;
}
