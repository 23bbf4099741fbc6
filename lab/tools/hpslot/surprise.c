/* hpslot remove --surprise: yank the slots in a pause of the domain (config
 * cycles, or the lab QEMU's x-surprise-removal), optionally timed against
 * the guest (--when-masked, --when-reset), then --quiet-ms, --wait-guest and
 * the per-slot results. */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

/*
 * The lab's own QEMU (lab_platform=fidelity, qemu/patches/) has a root-port
 * property x-surprise-removal that makes device_del pull the card at once.
 * 1 the port has it, 0 it has not (Debian's QEMU), -1 unknown.
 */
int hp_port_qemu_surprise(struct hp_ctx *h, const struct hp_port *p)
{
	struct json_object *a = json_object_new_object(), *r;
	char err[256];

	json_object_object_add(a, "path", json_object_new_string(p->path));
	json_object_object_add(a, "property", json_object_new_string("x-surprise-removal"));
	if (hp_qmp(h, "qom-get", a, &r, err, sizeof(err)))
		return strstr(err, "not found") ? 0 : -1;
	json_object_put(r);
	return 1;
}

static int set_qemu_surprise(struct hp_ctx *h, const struct hp_port *p, bool on, char *err, size_t len)
{
	struct json_object *a = json_object_new_object();

	json_object_object_add(a, "path", json_object_new_string(p->path));
	json_object_object_add(a, "property", json_object_new_string("x-surprise-removal"));
	json_object_object_add(a, "value", json_object_new_boolean(on));
	return hp_qmp(h, "qom-set", a, NULL, err, len);
}

/* Pull the card with the port's surprise device_del; the port is left in
 * orderly mode, so a later plain device_del presses the button again. */
static int qemu_surprise(struct hp_ctx *h, const struct hp_port *p, char *err, size_t len)
{
	char e2[256];
	int rc;

	if (set_qemu_surprise(h, p, true, err, len))
		return -1;
	rc = device_del(h, dev_ref(p), err, len);
	if (set_qemu_surprise(h, p, false, e2, sizeof(e2)) && !rc) {
		snprintf(err, len, "resetting x-surprise-removal: %s", e2);
		rc = -1;
	}
	return rc;
}

struct yank {
	uint16_t ctl0, sta0, ctl1, sta1;
	long long stop_sent;	/* monotonic ns: the pause this slot went in */
	long long yank_real, yank_mono;
	double guest_off, guest_done;	/* s after resume, -1 not seen */
	bool read_ok, yanked, restored, read_after;
	bool qemu;	/* pulled by QEMU's surprise device_del, not config cycles */
	char err[512];
};

/* A whole JBOF yanked at its root port: QEMU must have deleted the switch's
 * downstream ports and every drive in them with it. Adds "switch" and
 * "below" (each downstream port: its slot, drive, gone) to the slot's
 * record; returns how many are still there. */
static int switch_gone(struct hp_ctx *h, struct hp_topo *t, const struct hp_port *p, struct json_object *j)
{
	struct json_object *below = json_object_new_array();
	int left = 0;

	json_object_object_add(j, "switch", json_object_new_string(dev_ref(p)));
	for (int i = 0; i < t->nports; i++) {
		const struct hp_port *q = &t->ports[i];
		if (!q->downstream || strcmp(q->root_port, p->id))
			continue;
		struct json_object *b = json_object_new_object();
		int port_there = hp_device_present(h, q->path);
		int drive_there = q->ndrives ? hp_device_present(h, q->drive.path) : 0;
		bool gone = port_there == 0 && drive_there == 0;
		json_object_object_add(b, "slot", json_object_new_int(q->slot));
		json_object_object_add(b, "port", json_object_new_string(q->id));
		json_object_object_add(b, "device", q->ndrives ? json_object_new_string(dev_ref(q)) : NULL);
		json_object_object_add(b, "serial", q->drive.serial[0] ? json_object_new_string(q->drive.serial) : NULL);
		json_object_object_add(b, "gone", json_object_new_boolean(gone));
		json_object_array_add(below, b);
		left += !gone;
	}
	json_object_object_add(j, "below", below);
	json_object_object_add(j, "below_left", json_object_new_int(left));
	return left;
}

/* Yank one slot; the domain is paused and 0xCF8 saved. The lab's QEMU pulls
 * the card itself (x-surprise-removal); Debian's gets the config-cycle recipe,
 * with Hot-Plug Interrupt Enable left off for --quiet-ms. */
static void yank_one(struct hp_ctx *h, struct hp_port *p, struct yank *s, long quiet_ms)
{
	if (slot_read(h, p, &s->ctl0, &s->sta0, s->err, sizeof(s->err)))
		return;
	s->read_ok = true;
	s->yank_mono = hp_mono_ns();
	s->yank_real = hp_real_ns();
	if (s->qemu) {
		/* Slot Control is not touched: nothing to restore */
		if (qemu_surprise(h, p, s->err, sizeof(s->err)))
			return;
		s->yanked = s->restored = true;
		if (!slot_read(h, p, &s->ctl1, &s->sta1, s->err, sizeof(s->err)))
			s->read_after = true;
		return;
	}
	uint16_t keep = quiet_ms ? s->ctl0 & ~SLTCTL_HPIE : s->ctl0;
	if (slot_write_here(h, p, hp_yank_value(keep), s->err, sizeof(s->err))) {
		/* the power-off write may or may not have happened: put the old value back */
		char e2[256];
		slot_write(h, p, s->ctl0, e2, sizeof(e2));
		return;
	}
	s->yanked = true;
	if (slot_write_here(h, p, keep, s->err, sizeof(s->err))) {
		char e2[256];
		if (slot_write(h, p, keep, e2, sizeof(e2)))
			return;
		s->err[0] = 0;
	}
	s->restored = true;
	uint32_t v;
	if (!hp_cfg_read32_here(h, &v, s->err, sizeof(s->err))) {
		s->ctl1 = (uint16_t)v;
		s->sta1 = (uint16_t)(v >> 16);
		s->read_after = true;
	}
}

/* Notification enables a slot reset masks: pciehp_reset_slot() turns off
 * PDCE (slots without an attention button) and DLLSCE, keeping HPIE on. */
static bool slot_masked(uint16_t ctl, uint16_t watch)
{
	return (ctl & SLTCTL_HPIE) && !(ctl & watch);
}

/* --when-masked: poll Slot Control until the guest
 * masks the slot's change notifications, then wait --after-mask-ms. Adds
 * "when_masked" to the output; 0 when the yank may go ahead. */
static int wait_masked(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *t,
		       struct hp_port *p, uint16_t *watch)
{
	struct json_object *j = json_object_new_object();
	uint16_t ctl0, ctl;
	char err[256], b[16];
	long long t0 = hp_mono_ns();
	long polls = 0;

	json_object_object_add(o->root, "when_masked", j);
	json_object_object_add(j, "timeout_ms", json_object_new_int64(a->when_masked_ms));
	json_object_object_add(j, "after_mask_ms", json_object_new_int64(a->after_mask_ms));
	json_object_object_add(j, "poll", json_object_new_string(t->ecam ? "ecam" : "cf8-paused"));
	/* hp_port_read_regs: ECAM with the domain running, or 0xCF8 in a pause
	 * of its own where ECAM is off (QEMU disables MMCONFIG at an S3 wake-up) */
	if (hp_port_read_regs(h, t, p, err, sizeof(err))) {
		hp_fail(o, "--when-masked could not read Slot Control: %s; nothing yanked", err);
		return HP_EXIT_FAILED;
	}
	ctl0 = p->sltctl;
	snprintf(b, sizeof(b), "0x%04x", ctl0);
	json_object_object_add(j, "sltctl_before", json_object_new_string(b));
	*watch = ctl0 & (SLTCTL_PDCE | SLTCTL_DLLSCE);
	if (!(ctl0 & SLTCTL_HPIE) || !*watch) {
		hp_fail(o, "slot %d: Slot Control 0x%04x has no change notification on (HPIE with PDCE or DLLSCE) "
			"for a mask to turn off; nothing yanked", p->slot, ctl0);
		return HP_EXIT_REFUSED;
	}
	/* as --when-reset's: the caller may start the reset from here on */
	fprintf(stderr, "hpslot: slot %d: Slot Control 0x%04x at port %s; waiting up to %ld ms for the guest to "
		"mask it\n", p->slot, ctl0, p->id, a->when_masked_ms);
	fflush(stderr);
	for (;;) {
		if (hp_port_read_regs(h, t, p, err, sizeof(err))) {
			hp_fail(o, "--when-masked: %s; nothing yanked", err);
			return HP_EXIT_FAILED;
		}
		ctl = p->sltctl;
		polls++;
		/* masked, and the Command Completed of the masking write handled
		 * (the guest's IRQ handler clears it): next comes the bus reset.
		 * Yanking before the handler ran would let it read the removal's
		 * events together with Command Completed. */
		if (slot_masked(ctl, *watch) && !(p->sltsta & SLTSTA_CC))
			break;
		if (!t->ecam)	/* let the guest run between two pauses */
			hp_sleep(0.002);
		if (hp_mono_ns() - t0 > a->when_masked_ms * 1000000LL) {
			json_object_object_add(j, "polls", json_object_new_int64(polls));
			json_object_object_add(j, "masked", json_object_new_boolean(false));
			hp_fail(o, "slot %d: the guest did not mask its change notifications (0x%04x of Slot Control "
				"0x%04x) within %ld ms; nothing yanked", p->slot, *watch, ctl0, a->when_masked_ms);
			return HP_EXIT_FAILED;
		}
	}
	json_object_object_add(j, "masked", json_object_new_boolean(true));
	json_object_object_add(j, "polls", json_object_new_int64(polls));
	json_object_object_add(j, "waited_ms", hp_num((hp_mono_ns() - t0) / 1e6, 1));
	snprintf(b, sizeof(b), "0x%04x", ctl);
	json_object_object_add(j, "sltctl_masked", json_object_new_string(b));
	hp_say(o, "slot %d: guest masked its notifications (Slot Control 0x%04x -> 0x%04x) after %.1f ms, "
	       "%ld polls; yank in %ld ms\n", p->slot, ctl0, ctl, (hp_mono_ns() - t0) / 1e6, polls,
	       a->after_mask_ms);
	hp_sleep(a->after_mask_ms / 1000.0);
	return 0;
}

/* --when-reset: the port's x-sbr-count (qemu/patches/0011) through qom-get,
 * with the domain running */
struct sbr_ctx {
	struct hp_ctx *h;
	const struct hp_port *p;
	long timeout_ms;
};

static int sbr_read(void *arg, unsigned long long *count, char *err, size_t len)
{
	struct sbr_ctx *c = arg;
	long long v;

	if (hp_qom_get_int(c->h, c->p->path, HP_SBR_PROP, &v, err, len))
		return -1;
	if (v < 0) {
		snprintf(err, len, "qom-get %s %s: not a count: %lld", c->p->path, HP_SBR_PROP, v);
		return -1;
	}
	*count = (unsigned long long)v;
	return 0;
}

static long long sbr_now(void *arg)
{
	(void)arg;
	return hp_mono_ns();
}

static void sbr_sleep(void *arg, long ms)
{
	(void)arg;
	hp_sleep(ms / 1000.0);
}

/* on stderr whatever the output mode: a caller that starts the reset waits
 * for this line, so the count is not read after the reset */
static void sbr_ready(void *arg, unsigned long long count)
{
	struct sbr_ctx *c = arg;

	fprintf(stderr, "hpslot: slot %d: %s %llu at port %s; waiting up to %ld ms for a Secondary Bus Reset\n",
		c->p->slot, HP_SBR_PROP, count, c->p->id, c->timeout_ms);
	fflush(stderr);
}

/* --when-reset: poll the port's count of Secondary Bus Resets until the
 * guest asserts one, then wait --after-reset-ms. Adds "when_reset" to the
 * output; 0 when the yank may go ahead. */
static int wait_reset(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_port *p,
		      struct hp_sbr_wait *w)
{
	struct json_object *j = json_object_new_object();
	struct sbr_ctx c = { h, p, a->when_reset_ms };
	const struct hp_sbr_ops ops = { sbr_read, sbr_now, sbr_sleep, sbr_ready, &c };

	json_object_object_add(o->root, "when_reset", j);
	json_object_object_add(j, "timeout_ms", json_object_new_int64(a->when_reset_ms));
	json_object_object_add(j, "after_reset_ms", json_object_new_int64(a->after_reset_ms));
	json_object_object_add(j, "property", json_object_new_string(HP_SBR_PROP));
	enum hp_sbr_result r = hp_sbr_wait(&ops, a->when_reset_ms, HP_SBR_POLL_MS, w);
	if (r == HP_SBR_ERROR && w->first_read && strstr(w->err, "not found")) {
		/* Debian's QEMU */
		hp_fail(o, "domain %s runs a QEMU without the lab's %s on port %s (%s): --when-reset needs the "
			"lab's QEMU, lab_platform=fidelity (qemu/patches/0011); nothing yanked", a->domain,
			HP_SBR_PROP, p->id, w->err);
		return HP_EXIT_REFUSED;
	}
	if (r == HP_SBR_ERROR) {
		hp_fail(o, "--when-reset could not read %s of port %s: %s; nothing yanked", HP_SBR_PROP, p->id,
			w->err);
		return HP_EXIT_FAILED;
	}
	json_object_object_add(j, "count_before", json_object_new_int64((int64_t)w->count_before));
	json_object_object_add(j, "polls", json_object_new_int64(w->polls));
	if (r == HP_SBR_TIMEOUT) {
		json_object_object_add(j, "reset", json_object_new_boolean(false));
		hp_fail(o, "slot %d: the guest asserted no Secondary Bus Reset at port %s (%s stayed %llu) within "
			"%ld ms; nothing yanked", p->slot, p->id, HP_SBR_PROP, w->count_before, a->when_reset_ms);
		return HP_EXIT_FAILED;
	}
	double waited = (w->seen_ns - w->t0_ns) / 1e6;
	json_object_object_add(j, "reset", json_object_new_boolean(true));
	json_object_object_add(j, "count_at_reset", json_object_new_int64((int64_t)w->count_last));
	json_object_object_add(j, "waited_ms", hp_num(waited, 1));
	hp_say(o, "slot %d: guest reset port %s (%s %llu -> %llu) after %.1f ms, %ld polls; yank in %ld ms\n",
	       p->slot, p->id, HP_SBR_PROP, w->count_before, w->count_last, waited, w->polls, a->after_reset_ms);
	hp_sleep(a->after_reset_ms / 1000.0);
	return 0;
}

/* --when-reset, in the pause after the yank: how close to the reset it came */
static void reset_at_yank(struct hp_out *o, struct hp_ctx *h, struct hp_port *p, const struct yank *y,
			  const struct hp_sbr_wait *w, long timeout_ms)
{
	struct json_object *j;
	struct sbr_ctx c = { h, p, timeout_ms };
	unsigned long long count;
	char err[256];

	if (!json_object_object_get_ex(o->root, "when_reset", &j))
		return;
	json_object_object_add(j, "count_at_yank", sbr_read(&c, &count, err, sizeof(err)) ? NULL :
			       json_object_new_int64((int64_t)count));
	json_object_object_add(j, "reset_to_yank_max_ms", y->yanked ?
			       hp_num(hp_sbr_to_yank_max_ms(w, y->yank_mono), 1) : NULL);
	json_object_object_add(j, "in_reset", y->yanked ?
			       json_object_new_boolean(hp_sbr_in_reset(w, y->yank_mono)) : NULL);
}

int surprise(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *t,
	     struct hp_port **ports)
{
	struct yank *y = calloc((size_t)a->nslots, sizeof(*y));
	struct pause ps, first = { 0 };
	char err[512] = "", perr[512] = "";
	int rc = HP_EXIT_OK, failed = 0;
	long long t_before = hp_real_ns();
	/* all slots in one pause, or (--stagger-ms) one pause a slot */
	int step = a->stagger_ms > 0 ? 1 : a->nslots;
	double paused_ms = 0, paused_min_ms = 0;

	/* before the pause: which ports can pull the card themselves */
	for (int i = 0; i < a->nslots; i++)
		y[i].qemu = hp_port_qemu_surprise(h, ports[i]) == 1;
	uint16_t watch = 0;
	if (a->when_masked_ms) {
		int wrc = wait_masked(a, o, h, t, ports[0], &watch);
		if (wrc) {
			free(y);
			return wrc;
		}
	}
	struct hp_sbr_wait sbr;
	if (a->when_reset_ms) {
		int wrc = wait_reset(a, o, h, ports[0], &sbr);
		if (wrc) {
			free(y);
			return wrc;
		}
	}
	for (int g = 0; g < a->nslots; g += step) {
		if (g > 0)
			hp_sleep(a->stagger_ms / 1000.0);
		if (pause_begin(h, &ps, err, sizeof(err))) {
			if (ps.stopped)	/* stopped but 0xCF8 unreadable: resume */
				pause_end(h, &ps, perr, sizeof(perr));
			if (g == 0) {
				hp_fail(o, "could not %s the domain: %s; %snothing changed", ps.stopped ? "use" : "stop",
					err, ps.stopped ? "resumed, " : "");
				free(y);
				return ps.not_running ? HP_EXIT_REFUSED : HP_EXIT_FAILED;
			}
			for (int i = g; i < a->nslots; i++)
				snprintf(y[i].err, sizeof(y[i].err), "not yanked: pausing for it failed: %.400s", err);
			break;
		}
		if (g == 0) {
			first = ps;
			json_object_object_add(o->root, "guest_asleep", json_object_new_boolean(ps.asleep));
		}
		for (int i = g; i < g + step && i < a->nslots; i++) {
			y[i].stop_sent = ps.stop_sent;
			yank_one(h, ports[i], &y[i], a->quiet_ms);
		}
		if (a->when_masked_ms) {
			struct json_object *j;
			json_object_object_get_ex(o->root, "when_masked", &j);
			json_object_object_add(j, "masked_at_yank", y[0].read_ok ?
					       json_object_new_boolean(slot_masked(y[0].ctl0, watch)) : NULL);
		}
		if (a->when_reset_ms)
			reset_at_yank(o, h, ports[0], &y[0], &sbr, a->when_reset_ms);
		if (pause_end(h, &ps, perr, sizeof(perr))) {
			hp_fail(o, "%s", perr);
			rc = HP_EXIT_FAILED;
			break;
		}
		paused_ms += (ps.cont_done - ps.stop_sent) / 1e6;
		paused_min_ms += (ps.cont_sent - ps.stop_done) / 1e6;
	}
	if (o->after_resume && !ps.stopped)
		o->after_resume(o, h, ps.cont_done, o->after_resume_arg);
	json_object_object_add(o->root, "paused_ms", hp_num(paused_ms, 3));
	json_object_object_add(o->root, "paused_min_ms", hp_num(paused_min_ms, 3));
	json_object_object_add(o->root, "stop_ns", json_object_new_int64(first.stop_real));
	long long resumed_real = first.stop_real + (ps.cont_done - first.stop_sent);
	json_object_object_add(o->root, "resumed_ns", json_object_new_int64(resumed_real));
	if (step == 1 && a->nslots > 1) {
		json_object_object_add(o->root, "stagger_ms", json_object_new_int64(a->stagger_ms));
		json_object_object_add(o->root, "pauses", json_object_new_int(a->nslots));
	}

	/* QEMU's own STOP/RESUME timestamps (monitor events), when they came */
	long long ev_stop = -1, ev_resume = -1;
	for (double t0 = hp_mono(); step == a->nslots && hp_mono() - t0 < 0.5;) {
		/* ours: the first STOP after we sent stop, the first RESUME after cont */
		ev_stop = event_ts_ns(h, "STOP", NULL, ps.stop_real);
		ev_resume = event_ts_ns(h, "RESUME", NULL, ps.stop_real + (ps.cont_sent - ps.stop_sent));
		if (ev_stop > 0 && ev_resume > 0)
			break;
		hp_sleep(0.01);
	}
	if (ev_stop > 0 && ev_resume > 0)
		json_object_object_add(o->root, "paused_qemu_ms", hp_num((ev_resume - ev_stop) / 1e6, 3));
	else
		json_object_object_add(o->root, "paused_qemu_ms", NULL);
	char qms[64] = "n/a";
	if (ev_stop > 0 && ev_resume > 0)
		snprintf(qms, sizeof(qms), "%.1f ms", (ev_resume - ev_stop) / 1e6);
	hp_say(o, "domain %s paused %.1f ms (QEMU STOP->RESUME %s) for %d slot(s); resumed at %lld ns realtime\n",
	       a->domain, paused_ms, qms, a->nslots, resumed_real);

	/* --quiet-ms: give the slots their Hot-Plug Interrupt Enable back */
	bool *hpie = calloc((size_t)a->nslots, sizeof(*hpie));
	if (a->quiet_ms) {
		struct pause q;
		char qerr[512] = "", qe2[512];
		hp_sleep(a->quiet_ms / 1000.0);
		if (pause_begin(h, &q, qerr, sizeof(qerr)) == 0) {
			for (int i = 0; i < a->nslots; i++) {
				uint16_t ctl, sta;
				if (y[i].yanked && !slot_read(h, ports[i], &ctl, &sta, qerr, sizeof(qerr)) &&
				    !slot_write_here(h, ports[i], ctl | SLTCTL_HPIE, qerr, sizeof(qerr)))
					hpie[i] = true;
			}
		}
		if (pause_end(h, &q, qe2, sizeof(qe2)) || qerr[0]) {
			hp_fail(o, "setting Hot-Plug Interrupt Enable back: %s %s", qerr, qe2);
			rc = HP_EXIT_FAILED;
		}
		json_object_object_add(o->root, "quiet_ms", json_object_new_int64(a->quiet_ms));
	}

	/* --wait-guest: watch the guest tear the slots down (no pause). One
	 * slot at a time, in the order given, one register read a tick: every
	 * read is a monitor round trip that takes the host CPU the guest's
	 * vCPUs are tearing the slots down on, so a 32-slot yank must not cost
	 * 32 reads a tick. A slot behind the one watched is seen only when its
	 * turn comes: its times are upper bounds. */
	for (int i = 0; i < a->nslots; i++)
		y[i].guest_off = y[i].guest_done = -1;
	if (a->wait_guest > 0) {
		int front = 0;
		while (front < a->nslots && (hp_mono_ns() - ps.cont_done) / 1e9 < a->wait_guest) {
			struct hp_port *p = ports[front];
			char e[256];
			if (!y[front].yanked) {	/* nothing for the guest to tear down */
				front++;
				continue;
			}
			if (hp_port_read_regs(h, t, p, e, sizeof(e)) == 0) {
				double now = (hp_mono_ns() - ps.cont_done) / 1e9;
				if (!hp_power_on(p->sltctl) && y[front].guest_off < 0)
					y[front].guest_off = now;
				if (!hp_power_on(p->sltctl) && hp_pic(p->sltctl) == SLTCTL_IND_OFF) {
					y[front++].guest_done = now;
					continue;	/* the next slot at once */
				}
			}
			hp_sleep(0.02);
		}
		json_object_object_add(o->root, "wait_guest_s", hp_num(a->wait_guest, 1));
	}

	for (int i = 0; i < a->nslots; i++) {
		struct hp_port *p = ports[i];
		struct yank *s = &y[i];
		struct json_object *j = slot_base(p);
		const char *leftover = "none";
		if (a->wait_guest > 0) {
			json_object_object_add(j, "guest_power_off_s", s->guest_off >= 0 ? hp_num(s->guest_off, 3) : NULL);
			json_object_object_add(j, "guest_done_s", s->guest_done >= 0 ? hp_num(s->guest_done, 3) : NULL);
			json_object_object_add(j, "guest_done", json_object_new_boolean(s->guest_done >= 0));
		}
		char lerr[512] = "";

		if (s->read_ok) {
			json_object_object_add(j, "sltctl_before", hp_hex16(s->ctl0));
			json_object_object_add(j, "sltsta_before", hp_hex16(s->sta0));
		}
		if (s->yanked) {
			json_object_object_add(j, "yank_ns", json_object_new_int64(s->yank_real));
			json_object_object_add(j, "yank_after_stop_ms",
					       hp_num((s->yank_mono - s->stop_sent) / 1e6, 3));
			if (!s->qemu)
				json_object_object_add(j, "yank_value", hp_hex16(hp_yank_value(s->ctl0)));
			set_str(j, "method", s->qemu ? "qemu-surprise-removal" : "config-cycles");
		}
		if (s->read_after) {
			json_object_object_add(j, "sltctl_after", hp_hex16(s->ctl1));
			json_object_object_add(j, "sltsta_after", hp_hex16(s->sta1));
		}
		json_object_object_add(j, "restored", json_object_new_boolean(s->restored));
		if (a->quiet_ms)
			json_object_object_add(j, "hpie_restored", json_object_new_boolean(hpie[i]));
		int present = device_present(h, p);
		if (present == 1 && s->read_ok) {
			/* QEMU kept the device (e.g. the slot was already powered off, so
			 * the write was no power-off transition): delete the leftover. */
			char derr[256];
			leftover = "present";
			if (device_del(h, dev_ref(p), derr, sizeof(derr))) {
				snprintf(lerr, sizeof(lerr), "device_del of the leftover: %s", derr);
			} else {
				for (double t0 = hp_mono(); hp_mono() - t0 < 2.0; hp_sleep(0.05))
					if ((present = device_present(h, p)) == 0)
						break;
				leftover = present == 0 ? "deleted" : "delete-pending";
			}
		}
		/* DEVICE_DELETED comes when QEMU finalizes the object: may lag a little */
		long long ev = -1;
		for (double w0 = hp_mono(); present == 0 && hp_mono() - w0 < 0.5; hp_sleep(0.02))
			if ((ev = event_ts_ns(h, "DEVICE_DELETED", p->drive.id[0] ? p->drive.id : p->drive.path,
					      t_before)) > 0)
				break;
		json_object_object_add(j, "device_deleted_ns", ev > 0 ? json_object_new_int64(ev) : NULL);
		set_str(j, "leftover", leftover);
		int below_left = hp_port_holds_switch(p) ? switch_gone(h, t, p, j) : 0;
		bool unplugged = s->read_after && !(s->sta1 & SLTSTA_PDS);
		json_object_object_add(j, "unplugged", json_object_new_boolean(unplugged));
		const char *result;
		if (below_left > 0)
			result = "failed";
		else if (present == 0 && s->yanked && s->restored)
			result = "removed";
		else if (present == 0)
			result = "removed-with-errors";
		else
			result = "failed";
		set_str(j, "result", result);
		char fl0[64] = "", fl1[64] = "";
		hp_sltsta_flags(s->sta0, fl0, sizeof(fl0));
		hp_sltsta_flags(s->sta1, fl1, sizeof(fl1));
		if (s->err[0] || lerr[0]) {
			char e[1100];
			snprintf(e, sizeof(e), "%s%s%s", s->err, s->err[0] && lerr[0] ? "; " : "", lerr);
			set_str(j, "error", e);
			fprintf(stderr, "hpslot: slot %d: %s\n", p->slot, e);
		}
		if (strcmp(result, "removed"))
			failed++;
		json_object_array_add(o->slots, j);
		if (s->qemu)
			hp_say(o, "slot %-4d %-7s %s %-8s yank at %lld ns (+%.1f ms)  QEMU surprise removal  "
			       "sltctl 0x%04x  sltsta 0x%04x [%s] -> 0x%04x [%s]  leftover=%s\n",
			       p->slot, p->id, dev_ref(p), result, s->yank_real, (s->yank_mono - s->stop_sent) / 1e6,
			       s->ctl1, s->sta0, fl0, s->sta1, fl1, leftover);
		else
			hp_say(o, "slot %-4d %-7s %s %-8s yank at %lld ns (+%.1f ms)  sltctl 0x%04x->0x%04x->0x%04x  "
			       "sltsta 0x%04x [%s] -> 0x%04x [%s]  leftover=%s\n",
			       p->slot, p->id, dev_ref(p), result, s->yank_real, (s->yank_mono - s->stop_sent) / 1e6,
			       s->ctl0, hp_yank_value(s->ctl0), s->ctl1, s->sta0, fl0, s->sta1, fl1, leftover);
		if (a->wait_guest > 0 && s->guest_done >= 0)
			hp_say(o, "          guest powered the slot off %.3f s and finished %.3f s after resume\n",
			       s->guest_off, s->guest_done);
		else if (a->wait_guest > 0)
			hp_say(o, "          guest did not finish the teardown within %.1f s (powered off: %s)\n",
			       a->wait_guest, s->guest_off >= 0 ? "yes" : "no");
	}
	free(y);
	free(hpie);
	if (failed && rc == HP_EXIT_OK) {
		hp_fail(o, "%d of %d slot(s) were not removed", failed, a->nslots);
		rc = HP_EXIT_FAILED;
	}
	return rc;
}
