/* hpslot storm: K seeded random removals and adds across slots, then a
 * wait until everything settled and the expected state of every slot next
 * to QEMU's (see `hpslot help storm`). */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

struct sstate {
	bool occupied;		/* expected */
	char serial[64];	/* expected serial when occupied ("" unknown) */
	bool pending;		/* orderly removal started; QEMU may still hold the drive */
};

/* Steady registers for the expected occupancy: occupied -- a device,
 * present, powered, indicator on; empty -- no device, not present, powered
 * off, indicator off. NULL when steady, else what is not. */
static const char *unsettled(const struct hp_port *p, bool occupied, char *buf, size_t len)
{
	if (!p->regs) {
		snprintf(buf, len, "registers unreadable");
		return buf;
	}
	bool pds = p->sltsta & SLTSTA_PDS, on = hp_power_on(p->sltctl);
	int pic = hp_pic(p->sltctl);
	if (occupied && p->ndrives && pds && on && pic == SLTCTL_IND_ON)
		return NULL;
	if (!occupied && !p->ndrives && !pds && !on && pic == SLTCTL_IND_OFF)
		return NULL;
	snprintf(buf, len, "%s, %s, power %s, indicator %s", p->ndrives ? "device in QEMU" : "no device in QEMU",
		 pds ? "present" : "not present", on ? "on" : "off", hp_indicator_name(pic));
	return buf;
}

static void sub_args(struct hp_args *sub, const struct hp_args *a, enum hp_cmd cmd, int idx)
{
	*sub = *a;
	sub->cmd = cmd;
	sub->json = true;
	sub->nslots = 1;
	sub->slots[0] = a->slots[idx];
	sub->serial = NULL;
	sub->node = NULL;
	sub->force = false;
	sub->size_given = false;
	sub->cancel = false;
	sub->wait_guest = 0;
	sub->mode = cmd == HP_CMD_REMOVE ? HP_MODE_SURPRISE : HP_MODE_NONE;
}

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *x;
	if (o && json_object_object_get_ex(o, key, &x) && json_object_is_type(x, json_type_string))
		return json_object_get_string(x);
	return NULL;
}

/* Copy a sub-command's error (and its first slot's) into the log entry. */
static void sub_error(struct hp_out *so, struct json_object *e, char *msg, size_t len)
{
	struct json_object *x, *s0 = json_object_array_length(so->slots) ?
		json_object_array_get_idx(so->slots, 0) : NULL;
	const char *m = jstr(s0, "error");
	if (!m && json_object_object_get_ex(so->root, "error", &x))
		m = json_object_get_string(x);
	snprintf(msg, len, "%s", m ? m : "");
	if (m)
		json_object_object_add(e, "error", json_object_new_string(m));
}

/* Wait until the power indicator stops blinking, then device_del (QEMU
 * refuses it while the guest blinks). Does not wait for the removal. */
static int orderly_start(struct hp_ctx *h, struct hp_topo *t, struct hp_port *p, double wait, double *waited,
			 char *err, size_t len)
{
	double t0 = hp_mono();
	const char *dev = p->drive.id[0] ? p->drive.id : p->drive.path;
	char e[512];

	for (;;) {
		bool blink = p->regs && hp_pic(p->sltctl) == SLTCTL_IND_BLINK;
		if (!blink) {
			if (!hp_device_del(h, dev, e, sizeof(e))) {
				*waited = hp_mono() - t0;
				return 0;
			}
			if (!strstr(e, "busy") && !strstr(e, "in the process")) {
				snprintf(err, len, "device_del %s: %s", dev, e);
				return -1;
			}
		} else {
			snprintf(e, sizeof(e), "the guest is busy with the slot (power indicator blinking)");
		}
		if (hp_mono() - t0 > wait) {
			snprintf(err, len, "device_del %s not accepted within %.0f s: %s", dev, wait, e);
			return -1;
		}
		hp_sleep(0.1);
		if (hp_port_read_regs(h, t, p, e, sizeof(e))) {
			snprintf(err, len, "%s", e);
			return -1;
		}
	}
}

/* Wait (up to `limit` s) until every slot is steady for `st`. Returns the
 * number of unsettled slots; the topology is fresh on return. */
static int settle(struct hp_ctx *h, struct hp_topo *t, struct hp_args *a, struct hp_port **ports,
		  const struct sstate *st, double limit, double *took, char *err, size_t len)
{
	double t0 = hp_mono();
	char buf[256];

	for (;;) {
		int left = 0;
		if (hp_topo_reload(h, t, a, ports, err, len))
			return -1;
		for (int i = 0; i < a->nslots; i++)
			left += unsettled(ports[i], st[i].occupied, buf, sizeof(buf)) != NULL;
		*took = hp_mono() - t0;
		if (!left || *took >= limit)
			return left;
		hp_sleep(0.2);
	}
}

int cmd_storm(struct hp_args *a, struct hp_out *o)
{
	struct hp_ctx *h = NULL;
	struct hp_topo t;
	struct hp_port *ports[HP_MAX_SLOTS];
	struct sstate *st = calloc(HP_MAX_SLOTS, sizeof(*st));
	struct hp_storm_action *plan = calloc((size_t)(a->count > 0 ? a->count : 1), sizeof(*plan));
	bool occ[HP_MAX_SLOTS];
	char err[1024], buf[256];
	int rc = hp_prepare(a, o, &h, &t, ports, true, true), failed = 0, skipped = 0;

	json_object_object_add(o->root, "seed", json_object_new_uint64(a->seed));
	json_object_object_add(o->root, "count", json_object_new_int(a->count));
	json_object_object_add(o->root, "max_gap_ms", json_object_new_int64(a->max_gap_ms));
	json_object_object_add(o->root, "orderly_percent", json_object_new_int(a->orderly_percent));
	json_object_object_add(o->root, "wait_s", hp_num(a->wait, 1));
	json_object_object_add(o->root, "dry_run", json_object_new_boolean(a->dry_run));
	if (rc)
		goto out;

	/* the start: every slot steady, occupied or empty */
	for (int i = 0; i < a->nslots; i++) {
		st[i].occupied = ports[i]->ndrives > 0;
		snprintf(st[i].serial, sizeof(st[i].serial), "%s", ports[i]->drive.serial);
	}
	if (!a->dry_run) {
		double took;
		int left = settle(h, &t, a, ports, st, a->wait, &took, err, sizeof(err));
		if (left < 0) {
			hp_fail(o, "%s; nothing changed", err);
			rc = HP_EXIT_FAILED;
			goto out;
		}
		if (left) {
			hp_fail(o, "%d slot(s) not steady at the start after %.0f s (see initial); nothing changed",
				left, took);
			rc = HP_EXIT_REFUSED;
		}
		for (int i = 0; i < a->nslots; i++) {
			st[i].occupied = ports[i]->ndrives > 0;
			snprintf(st[i].serial, sizeof(st[i].serial), "%s", ports[i]->drive.serial);
		}
	}
	struct json_object *init = json_object_new_array();
	for (int i = 0; i < a->nslots; i++) {
		struct json_object *j = json_object_new_object();
		json_object_object_add(j, "slot", json_object_new_int(ports[i]->slot));
		json_object_object_add(j, "occupied", json_object_new_boolean(st[i].occupied));
		json_object_object_add(j, "serial", st[i].occupied ? json_object_new_string(st[i].serial) : NULL);
		if (unsettled(ports[i], st[i].occupied, buf, sizeof(buf)))
			json_object_object_add(j, "unsettled", json_object_new_string(buf));
		json_object_array_add(init, j);
		occ[i] = st[i].occupied;
	}
	json_object_object_add(o->root, "initial", init);
	if (rc)
		goto out;

	/* the plan */
	hp_storm_plan(a->seed, a->count, a->max_gap_ms, a->orderly_percent, occ, a->nslots, plan);
	struct json_object *pj = json_object_new_array();
	hp_say(o, "storm on %s: seed %llu, %d actions, gaps 0..%ld ms, %d %% of removals orderly\nplan:", a->domain,
	       a->seed, a->count, a->max_gap_ms, a->orderly_percent);
	for (int i = 0; i < a->count; i++) {
		struct json_object *j = json_object_new_object();
		json_object_object_add(j, "i", json_object_new_int(i + 1));
		json_object_object_add(j, "action", json_object_new_string(hp_storm_kind_name(plan[i].kind)));
		json_object_object_add(j, "slot", json_object_new_int(ports[plan[i].slot_idx]->slot));
		json_object_object_add(j, "gap_ms", json_object_new_int64(plan[i].gap_ms));
		json_object_array_add(pj, j);
		hp_say(o, "%s%d:%s:%d+%ld", i % 6 ? " " : "\n  ", i + 1, hp_storm_kind_name(plan[i].kind),
		       ports[plan[i].slot_idx]->slot, plan[i].gap_ms);
	}
	hp_say(o, "\n");
	json_object_object_add(o->root, "plan", pj);
	if (a->dry_run) {
		struct json_object *ex = json_object_new_array();
		for (int i = 0; i < a->nslots; i++) {
			struct json_object *j = json_object_new_object();
			json_object_object_add(j, "slot", json_object_new_int(ports[i]->slot));
			json_object_object_add(j, "occupied", json_object_new_boolean(occ[i]));
			json_object_array_add(ex, j);
		}
		json_object_object_add(o->root, "expected_end", ex);
		goto out;
	}

	/* act */
	struct json_object *log = json_object_new_array();
	json_object_object_add(o->root, "log", log);
	struct hp_args *sub = malloc(sizeof(*sub));
	double t0 = hp_mono();
	for (int k = 0; k < a->count; k++) {
		const struct hp_storm_action *ac = &plan[k];
		int i = ac->slot_idx;
		struct json_object *e = json_object_new_object();
		char msg[1024] = "";
		const char *result = "ok";
		double waited = 0;

		json_object_object_add(e, "i", json_object_new_int(k + 1));
		json_object_object_add(e, "action", json_object_new_string(hp_storm_kind_name(ac->kind)));
		json_object_object_add(e, "slot", json_object_new_int(ports[i]->slot));
		json_object_object_add(e, "t_s", hp_num(hp_mono() - t0, 3));
		if (hp_topo_reload(h, &t, a, ports, err, sizeof(err))) {
			hp_fail(o, "action %d: %s", k + 1, err);
			json_object_put(e);
			rc = HP_EXIT_FAILED;
			break;
		}
		struct hp_port *p = ports[i];
		if (ac->kind != HP_STORM_ADD && (!st[i].occupied || !p->ndrives)) {
			result = "skipped";
			snprintf(msg, sizeof(msg), "slot %d holds no drive (%s): an earlier action did not work out",
				 p->slot, st[i].occupied ? "QEMU" : "expected");
		} else if (ac->kind == HP_STORM_ADD && st[i].occupied) {
			result = "skipped";
			snprintf(msg, sizeof(msg), "slot %d is expected to hold a drive: an earlier action did not "
				 "work out", p->slot);
		} else if (ac->kind == HP_STORM_SURPRISE) {
			struct hp_out so;
			sub_args(sub, a, HP_CMD_REMOVE, i);
			hp_out_init(&so, sub);
			json_object_object_add(e, "serial", json_object_new_string(p->drive.serial));
			int r = hp_remove_ports(sub, &so, h, &t, &ports[i]);
			struct json_object *x;
			if (json_object_object_get_ex(so.root, "paused_ms", &x))
				json_object_object_add(e, "paused_ms", json_object_get(x));
			if (r) {
				result = "failed";
				sub_error(&so, e, msg, sizeof(msg));
				/* still there? then it is still expected */
				st[i].occupied = hp_device_present(h, p->drive.path) != 0;
			} else {
				st[i].occupied = false;
			}
			hp_out_free(&so);
		} else if (ac->kind == HP_STORM_ORDERLY) {
			json_object_object_add(e, "serial", json_object_new_string(p->drive.serial));
			if (orderly_start(h, &t, p, a->wait, &waited, msg, sizeof(msg))) {
				result = "failed";
			} else {
				st[i].occupied = false;
				st[i].pending = true;
			}
			json_object_object_add(e, "waited_s", hp_num(waited, 2));
		} else {
			struct hp_out so;
			sub_args(sub, a, HP_CMD_ADD, i);
			hp_out_init(&so, sub);
			int r = hp_add_ports(sub, &so, h, &t, &ports[i]);
			struct json_object *s0 = json_object_array_length(so.slots) ?
				json_object_array_get_idx(so.slots, 0) : NULL, *x;
			if (s0 && json_object_object_get_ex(s0, "waited_s", &x))
				json_object_object_add(e, "waited_s", json_object_get(x));
			if (r) {
				result = "failed";
				sub_error(&so, e, msg, sizeof(msg));
			} else {
				const char *ser = jstr(s0, "serial");
				st[i].occupied = true;
				st[i].pending = false;
				snprintf(st[i].serial, sizeof(st[i].serial), "%s", ser ? ser : "");
				json_object_object_add(e, "serial", json_object_new_string(st[i].serial));
			}
			hp_out_free(&so);
		}
		json_object_object_add(e, "result", json_object_new_string(result));
		if (msg[0] && !json_object_object_get_ex(e, "error", NULL))
			json_object_object_add(e, "error", json_object_new_string(msg));
		failed += !strcmp(result, "failed");
		skipped += !strcmp(result, "skipped");
		json_object_array_add(log, e);
		hp_say(o, "%4d %8.3f s  %-8s slot %-4d %s%s%s\n", k + 1, hp_mono() - t0, hp_storm_kind_name(ac->kind),
		       ports[i]->slot, result, msg[0] ? ": " : "", msg);
		if (k + 1 < a->count)
			hp_sleep(ac->gap_ms / 1000.0);
	}
	free(sub);
	json_object_object_add(o->root, "actions_failed", json_object_new_int(failed));
	json_object_object_add(o->root, "actions_skipped", json_object_new_int(skipped));
	json_object_object_add(o->root, "storm_s", hp_num(hp_mono() - t0, 3));

	/* settle, then expected vs QEMU */
	double took = 0;
	int left = settle(h, &t, a, ports, st, a->settle, &took, err, sizeof(err));
	if (left < 0) {
		hp_fail(o, "settling: %s", err);
		rc = HP_EXIT_FAILED;
		goto out;
	}
	json_object_object_add(o->root, "settled", json_object_new_boolean(left == 0));
	json_object_object_add(o->root, "settle_s", hp_num(took, 2));
	json_object_object_add(o->root, "settle_limit_s", hp_num(a->settle, 1));
	int mismatches = 0;
	struct json_object *fin = json_object_new_array();
	hp_say(o, "final state (%s after %.1f s):\n", left ? "NOT settled" : "settled", took);
	for (int i = 0; i < a->nslots; i++) {
		struct hp_port *p = ports[i];
		struct json_object *j = json_object_new_object(), *ex = json_object_new_object(), *q = json_object_new_object();
		const char *why = unsettled(p, st[i].occupied, buf, sizeof(buf));
		bool qocc = p->ndrives > 0;
		bool match = !why && qocc == st[i].occupied &&
			     (!qocc || !st[i].serial[0] || !strcmp(st[i].serial, p->drive.serial));
		json_object_object_add(j, "slot", json_object_new_int(p->slot));
		json_object_object_add(ex, "occupied", json_object_new_boolean(st[i].occupied));
		json_object_object_add(ex, "serial", st[i].occupied ? json_object_new_string(st[i].serial) : NULL);
		json_object_object_add(j, "expected", ex);
		json_object_object_add(q, "occupied", json_object_new_boolean(qocc));
		json_object_object_add(q, "serial", qocc ? json_object_new_string(p->drive.serial) : NULL);
		json_object_object_add(q, "device", qocc ? json_object_new_string(p->drive.id[0] ? p->drive.id :
										 p->drive.path) : NULL);
		if (p->regs) {
			json_object_object_add(q, "presence", json_object_new_boolean(p->sltsta & SLTSTA_PDS));
			json_object_object_add(q, "power", json_object_new_string(hp_power_on(p->sltctl) ? "on" : "off"));
			json_object_object_add(q, "power_indicator",
					       json_object_new_string(hp_indicator_name(hp_pic(p->sltctl))));
			json_object_object_add(q, "sltctl", hp_hex16(p->sltctl));
			json_object_object_add(q, "sltsta", hp_hex16(p->sltsta));
		}
		json_object_object_add(j, "qemu", q);
		json_object_object_add(j, "settled", json_object_new_boolean(!why));
		if (why)
			json_object_object_add(j, "unsettled", json_object_new_string(why));
		json_object_object_add(j, "match", json_object_new_boolean(match));
		json_object_array_add(fin, j);
		mismatches += !match;
		hp_say(o, "  slot %-4d expected %-8s %-20s QEMU %-8s %-20s %s%s\n", p->slot,
		       st[i].occupied ? "occupied" : "empty", st[i].occupied ? st[i].serial : "",
		       qocc ? "occupied" : "empty", qocc ? p->drive.serial : "", match ? "ok" : "MISMATCH",
		       why ? (snprintf(err, sizeof(err), " (%s)", why), err) : "");
	}
	json_object_object_add(o->root, "final", fin);
	json_object_object_add(o->root, "mismatches", json_object_new_int(mismatches));
	if (failed || mismatches) {
		hp_fail(o, "%d action(s) failed, %d skipped, %d slot(s) not as expected%s", failed, skipped, mismatches,
			left ? " (not settled)" : "");
		rc = HP_EXIT_FAILED;
	}
out:
	free(st);
	free(plan);
	hp_topo_free(&t);
	hp_close(h);
	return rc;
}
