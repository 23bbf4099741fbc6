/* hpslot swap: surprise removal of a slot's drive, then -- D ms after the
 * domain resumed, without waiting for the guest -- a new drive into the
 * same slot; then watch whether QEMU keeps it (see `hpslot help swap`). */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

#define NULL_SIZE_DEFAULT (64LL << 20)

/* The guest's handling of the slot, seen in its registers (ms after the
 * resume, -1 not seen). */
struct timeline {
	double power_off, indicator_off, power_on, indicator_on;
	bool was_off;
};

struct swap {
	struct hp_port *port;
	struct hp_topo *t;
	long delay_ms;
	char id[64], serial[64], node[64];
	bool done, added;
	long long resumed_mono, add_mono, add_real, add_done_mono;
	struct timeline tl;
	char err[512];
};

static void observe(struct hp_ctx *h, struct swap *s)
{
	char e[256];
	struct hp_port *p = s->port;

	if (hp_port_read_regs(h, s->t, p, e, sizeof(e)))
		return;
	double ms = (hp_mono_ns() - s->resumed_mono) / 1e6;
	bool on = hp_power_on(p->sltctl);
	int pic = hp_pic(p->sltctl);
	if (!on && s->tl.power_off < 0)
		s->tl.power_off = ms;
	if (!on && pic == SLTCTL_IND_OFF && s->tl.indicator_off < 0)
		s->tl.indicator_off = ms;
	if (!on)
		s->tl.was_off = true;
	if (on && s->tl.was_off && s->tl.power_on < 0)
		s->tl.power_on = ms;
	if (on && s->tl.power_on >= 0 && pic == SLTCTL_IND_ON && s->tl.indicator_on < 0)
		s->tl.indicator_on = ms;
}

/* Called by remove --surprise right after the resume. */
static void add_after(struct hp_out *o, struct hp_ctx *h, long long resumed_mono, void *arg)
{
	struct swap *s = arg;
	(void)o;

	s->resumed_mono = resumed_mono;
	long long due = resumed_mono + s->delay_ms * 1000000LL;
	/* watch the guest while waiting, but stop polling shortly before the add */
	while (due - hp_mono_ns() > 40000000LL) {
		observe(h, s);
		hp_sleep(0.02);
	}
	hp_sleep((due - hp_mono_ns()) / 1e9);

	struct json_object *arg2 = json_object_new_object();
	json_object_object_add(arg2, "driver", json_object_new_string("nvme"));
	json_object_object_add(arg2, "id", json_object_new_string(s->id));
	json_object_object_add(arg2, "serial", json_object_new_string(s->serial));
	json_object_object_add(arg2, "drive", json_object_new_string(s->node));
	json_object_object_add(arg2, "bus", json_object_new_string(s->port->id));
	s->add_mono = hp_mono_ns();
	s->add_real = hp_real_ns();
	s->added = hp_qmp(h, "device_add", arg2, NULL, s->err, sizeof(s->err)) == 0;
	s->add_done_mono = hp_mono_ns();
	s->done = true;
}

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *x;
	if (o && json_object_object_get_ex(o, key, &x) && json_object_is_type(x, json_type_string))
		return json_object_get_string(x);
	return NULL;
}

static int node_del(struct hp_ctx *h, const char *node, char *err, size_t len)
{
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "node-name", json_object_new_string(node));
	return hp_qmp(h, "blockdev-del", d, NULL, err, len);
}

/* Delete unused swap-s<SLOT>-* nodes of earlier swaps; pick a free name. */
static int pick_node(struct hp_ctx *h, struct hp_out *o, int slot, char *out, size_t len, char *err, size_t errlen)
{
	struct json_object *arg = json_object_new_object(), *nodes = NULL, *blocks = NULL;
	char prefix[32];
	bool taken[1000] = { false };

	snprintf(prefix, sizeof(prefix), "swap-s%d-", slot);
	json_object_object_add(arg, "flat", json_object_new_boolean(1));
	if (hp_qmp(h, "query-named-block-nodes", arg, &nodes, err, errlen) ||
	    hp_qmp(h, "query-block", NULL, &blocks, err, errlen)) {
		json_object_put(nodes);
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(nodes); i++) {
		const char *nn = jstr(json_object_array_get_idx(nodes, i), "node-name");
		bool used = false;
		if (!nn || strncmp(nn, prefix, strlen(prefix)))
			continue;
		int k = atoi(nn + strlen(prefix));
		for (size_t b = 0; b < json_object_array_length(blocks); b++) {
			struct json_object *bl = json_object_array_get_idx(blocks, b), *ins;
			const char *bn;
			if (json_object_object_get_ex(bl, "inserted", &ins) && (bn = jstr(ins, "node-name")) &&
			    !strcmp(bn, nn))
				used = true;
		}
		char e2[256];
		if (!used && !node_del(h, nn, e2, sizeof(e2)))
			hp_note(o, "deleted the unused block node %s of an earlier swap", nn);
		else if (k > 0 && k < 1000)
			taken[k] = true;
	}
	json_object_put(nodes);
	json_object_put(blocks);
	for (int k = 1; k < 1000; k++)
		if (!taken[k]) {
			snprintf(out, len, "%s%d", prefix, k);
			return 0;
		}
	snprintf(err, errlen, "no free block node name %s<N>", prefix);
	return -1;
}

static struct json_object *ms_or_null(double v)
{
	return v >= 0 ? hp_num(v, 1) : NULL;
}

int cmd_swap(struct hp_args *a, struct hp_out *o)
{
	struct hp_ctx *h = NULL;
	struct hp_topo t;
	struct hp_port *ports[HP_MAX_SLOTS];
	struct swap s;
	struct hp_drive old;
	char err[512];
	const char *result = "remove-failed";
	int slotno = -1;
	int rc = hp_prepare(a, o, &h, &t, ports, true, true);

	memset(&s, 0, sizeof(s));
	s.tl.power_off = s.tl.indicator_off = s.tl.power_on = s.tl.indicator_on = -1;
	json_object_object_add(o->root, "delay_ms", json_object_new_int64(a->delay_ms));
	json_object_object_add(o->root, "settle_s", hp_num(a->settle, 1));
	if (rc)
		goto out;
	struct hp_port *p = ports[0];
	if (!p->ndrives) {
		hp_fail(o, "slot %d (%s) holds no drive; nothing changed", p->slot, p->id);
		rc = HP_EXIT_REFUSED;
		goto out;
	}
	if (!p->regs || !hp_power_on(p->sltctl) || hp_pic(p->sltctl) != SLTCTL_IND_ON) {
		hp_fail(o, "slot %d (%s): the guest is not done with it (Slot Control 0x%04x: power %s, indicator "
			"%s; a swap starts from a drive in use); nothing changed", p->slot, p->id, p->sltctl,
			hp_power_on(p->sltctl) ? "on" : "off", hp_indicator_name(hp_pic(p->sltctl)));
		rc = HP_EXIT_REFUSED;
		goto out;
	}
	old = p->drive;
	slotno = p->slot;

	/* the new drive: serial, device id, block node */
	if (a->serial) {
		snprintf(s.serial, sizeof(s.serial), "%s", a->serial);
	} else {
		if (old.serial[0])
			hp_remember_serial(h, p->slot, old.serial);
		if (hp_default_serial(h, p->slot, s.serial, sizeof(s.serial), err, sizeof(err))) {
			hp_fail(o, "slot %d: %s; nothing changed", p->slot, err);
			rc = HP_EXIT_REFUSED;
			goto out;
		}
	}
	if (!strcmp(s.serial, old.serial)) {
		hp_fail(o, "slot %d: the new drive's serial %s is the old drive's; nothing changed", p->slot, s.serial);
		rc = HP_EXIT_REFUSED;
		goto out;
	}
	if (hp_swap_device_id(p->slot, old.id, t.peripherals, s.id, sizeof(s.id))) {
		hp_fail(o, "slot %d: no free device id for the new drive; nothing changed", p->slot);
		rc = HP_EXIT_REFUSED;
		goto out;
	}
	if (pick_node(h, o, p->slot, s.node, sizeof(s.node), err, sizeof(err))) {
		hp_fail(o, "slot %d: %s; nothing changed", p->slot, err);
		rc = HP_EXIT_FAILED;
		goto out;
	}
	long long size = old.size > 0 ? old.size : NULL_SIZE_DEFAULT;
	{
		struct json_object *arg = json_object_new_object();
		json_object_object_add(arg, "driver", json_object_new_string("null-co"));
		json_object_object_add(arg, "node-name", json_object_new_string(s.node));
		json_object_object_add(arg, "size", json_object_new_int64(size));
		json_object_object_add(arg, "read-zeroes", json_object_new_boolean(1));
		if (hp_qmp(h, "blockdev-add", arg, NULL, err, sizeof(err))) {
			hp_fail(o, "slot %d: creating block node %s: %s; nothing changed", p->slot, s.node, err);
			rc = HP_EXIT_FAILED;
			goto out;
		}
	}
	{
		struct json_object *j = json_object_new_object();
		json_object_object_add(j, "device", json_object_new_string(old.id[0] ? old.id : old.path));
		json_object_object_add(j, "serial", old.serial[0] ? json_object_new_string(old.serial) : NULL);
		json_object_object_add(j, "node", old.node[0] ? json_object_new_string(old.node) : NULL);
		json_object_object_add(o->root, "old", j);
		j = json_object_new_object();
		json_object_object_add(j, "device", json_object_new_string(s.id));
		json_object_object_add(j, "serial", json_object_new_string(s.serial));
		json_object_object_add(j, "node", json_object_new_string(s.node));
		json_object_object_add(j, "size", json_object_new_int64(size));
		json_object_object_add(o->root, "new", j);
	}

	/* act: the yank, and from its resume hook the add */
	struct hp_args *sub = malloc(sizeof(*sub));
	struct hp_out so;
	long long t_start = hp_real_ns();
	*sub = *a;
	sub->cmd = HP_CMD_REMOVE;
	sub->mode = HP_MODE_SURPRISE;
	sub->wait_guest = 0;
	sub->json = true;
	sub->nslots = 1;
	hp_out_init(&so, sub);
	s.port = p;
	s.t = &t;
	s.delay_ms = a->delay_ms;
	so.after_resume = add_after;
	so.after_resume_arg = &s;
	int rrc = hp_remove_ports(sub, &so, h, &t, ports);
	{
		struct json_object *rem = json_object_array_length(so.slots) ?
			json_object_get(json_object_array_get_idx(so.slots, 0)) : json_object_new_object(), *x;
		if (json_object_object_get_ex(so.root, "paused_ms", &x))
			json_object_object_add(rem, "paused_ms", json_object_get(x));
		if (json_object_object_get_ex(so.root, "error", &x))
			json_object_object_add(rem, "error", json_object_get(x));
		json_object_object_add(rem, "exit", json_object_new_int(rrc));
		json_object_object_add(o->root, "removal", rem);
	}
	hp_out_free(&so);
	free(sub);
	if (!s.done) {
		char e2[256];
		hp_fail(o, "slot %d: the surprise removal did not get to resuming the domain (exit %d)", p->slot, rrc);
		node_del(h, s.node, e2, sizeof(e2));
		rc = rrc ? rrc : HP_EXIT_FAILED;
		goto report;
	}
	if (rrc)
		hp_fail(o, "slot %d: the surprise removal of %s did not fully work (exit %d, see removal)", p->slot,
			old.id[0] ? old.id : old.path, rrc);
	{
		long long now_r = hp_real_ns(), now_m = hp_mono_ns();
		json_object_object_add(o->root, "resumed_ns", json_object_new_int64(now_r - (now_m - s.resumed_mono)));
	}
	{
		struct json_object *ad = json_object_new_object();
		json_object_object_add(ad, "result", json_object_new_string(s.added ? "added" : "failed"));
		json_object_object_add(ad, "error", s.added ? NULL : json_object_new_string(s.err));
		json_object_object_add(ad, "after_resume_ms", hp_num((s.add_mono - s.resumed_mono) / 1e6, 3));
		json_object_object_add(ad, "device_add_ms", hp_num((s.add_done_mono - s.add_mono) / 1e6, 3));
		json_object_object_add(o->root, "add", ad);
	}
	json_object_object_add(o->root, "added_ns", json_object_new_int64(s.add_real));
	if (!s.added) {
		char e2[256];
		result = "add-failed";
		hp_fail(o, "slot %d: device_add of %s %.0f ms after the resume failed: %s", p->slot, s.id,
			(s.add_mono - s.resumed_mono) / 1e6, s.err);
		node_del(h, s.node, e2, sizeof(e2));
		rc = HP_EXIT_FAILED;
		goto report;
	}

	/* the new serial is used up either way: the next drive gets the next one */
	hp_remember_serial(h, p->slot, s.serial);

	/* watch: does QEMU keep the new drive? */
	char path[128];
	long long deleted = -1;
	snprintf(path, sizeof(path), "/machine/peripheral/%s", s.id);
	while ((hp_mono_ns() - s.add_mono) / 1e9 < a->settle) {
		long long ev = hp_event_ts(h, "DEVICE_DELETED", s.id, s.add_real, 1);
		int present = hp_device_present(h, path);
		if (ev > 0 || present == 0) {
			/* the event comes when QEMU finalizes the object: give it a moment */
			for (double w0 = hp_mono(); ev < 0 && hp_mono() - w0 < 0.5; hp_sleep(0.02))
				ev = hp_event_ts(h, "DEVICE_DELETED", s.id, s.add_real, 1);
			deleted = ev > 0 ? ev : hp_real_ns();
			json_object_object_add(o->root, "deleted_seen_by", json_object_new_string(ev > 0 ? "event" : "qom"));
			break;
		}
		observe(h, &s);
		hp_sleep(0.03);
	}
	observe(h, &s);
	bool kept = deleted < 0 && hp_device_present(h, path) == 1;
	result = kept ? "kept" : "deleted";
	json_object_object_add(o->root, "new_deleted_ns", deleted > 0 ? json_object_new_int64(deleted) : NULL);
	json_object_object_add(o->root, "deleted_after_add_ms",
			       deleted > 0 ? hp_num((deleted - s.add_real) / 1e6, 1) : NULL);
	if (!kept) {
		char e2[256];
		/* the node is free once the device is finalized */
		for (double w0 = hp_mono(); hp_mono() - w0 < 1.0; hp_sleep(0.05))
			if (!node_del(h, s.node, e2, sizeof(e2)))
				break;
		rc = HP_EXIT_FAILED;
		hp_fail(o, "slot %d: QEMU deleted the new drive %s %.0f ms after adding it (the guest powered the "
			"slot off while tearing down the old drive)", p->slot, s.id, (deleted - s.add_real) / 1e6);
	}

report:
	json_object_object_add(o->root, "result", json_object_new_string(result));
	json_object_object_add(o->root, "kept", json_object_new_boolean(!strcmp(result, "kept")));
	json_object_object_add(o->root, "deleted", json_object_new_boolean(!strcmp(result, "deleted")));
	{
		long long od = hp_event_ts(h, "DEVICE_DELETED", old.id[0] ? old.id : old.path, t_start, 1);
		json_object_object_add(o->root, "old_deleted_ns", od > 0 ? json_object_new_int64(od) : NULL);
		struct json_object *g = json_object_new_object();
		json_object_object_add(g, "power_off_ms", ms_or_null(s.tl.power_off));
		json_object_object_add(g, "indicator_off_ms", ms_or_null(s.tl.indicator_off));
		json_object_object_add(g, "power_on_ms", ms_or_null(s.tl.power_on));
		json_object_object_add(g, "indicator_on_ms", ms_or_null(s.tl.indicator_on));
		json_object_object_add(g, "note", json_object_new_string(
			"ms after the resume at which hpslot's register polls (every ~30 ms) first saw the "
			"guest power the slot off / turn its indicator off / power it on again / indicator on"));
		json_object_object_add(o->root, "guest", g);
	}
	if (s.done && !hp_topo_reload(h, &t, a, ports, err, sizeof(err)))
		json_object_object_add(o->root, "slot_after", hp_port_json(ports[0]));
	{
		char line[1400] = "";
		if (s.done && ports[0])
			hp_port_line(ports[0], line, sizeof(line));
		hp_say(o, "swap slot %d: %s -> %s (%s, serial %s) %ld ms after the resume: %s\n", slotno,
		       old.id[0] ? old.id : old.path, s.id, s.node, s.serial, a->delay_ms, result);
		if (s.tl.power_off >= 0 || s.tl.power_on >= 0)
			hp_say(o, "  guest: power off %.0f ms, indicator off %.0f ms, power on %.0f ms, indicator on "
			       "%.0f ms after the resume (-1: not seen)\n", s.tl.power_off, s.tl.indicator_off,
			       s.tl.power_on, s.tl.indicator_on);
		if (line[0])
			hp_say(o, "  now: %s\n", line);
	}
out:
	hp_topo_free(&t);
	hp_close(h);
	return rc;
}
