/* hpslot add: hot-add an NVMe drive into each slot. */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

struct plan {
	char id[32], node[64], serial[64];
	bool node_exists, created, added;
	long long size;
	double waited;
	long long added_real;
	char err[512];
};

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *x;
	if (o && json_object_object_get_ex(o, key, &x) && json_object_is_type(x, json_type_string))
		return json_object_get_string(x);
	return NULL;
}

/* node exists? its size; the device using it (query-block), if any */
static void node_info(struct json_object *nodes, struct json_object *blocks, const char *name, bool *exists,
		      long long *size, char *user, size_t ulen)
{
	*exists = false;
	*size = -1;
	user[0] = 0;
	for (size_t i = 0; nodes && i < json_object_array_length(nodes); i++) {
		struct json_object *n = json_object_array_get_idx(nodes, i), *img, *x;
		const char *nn = jstr(n, "node-name");
		if (!nn || strcmp(nn, name))
			continue;
		*exists = true;
		if (json_object_object_get_ex(n, "image", &img) && json_object_object_get_ex(img, "virtual-size", &x))
			*size = json_object_get_int64(x);
	}
	for (size_t i = 0; blocks && i < json_object_array_length(blocks); i++) {
		struct json_object *b = json_object_array_get_idx(blocks, i), *ins;
		const char *qdev = jstr(b, "qdev");
		if (!json_object_object_get_ex(b, "inserted", &ins))
			continue;
		const char *nn = jstr(ins, "node-name");
		if (nn && !strcmp(nn, name) && qdev && *qdev)
			snprintf(user, ulen, "%s", qdev);
	}
}

static bool in_list(const char *list, const char *id)
{
	size_t l = strlen(id);
	for (const char *p = list; (p = strstr(p, id)); p += l)
		if (p > list && p[-1] == ' ' && (p[l] == ' ' || !p[l]))
			return true;
	return false;
}

int cmd_add(struct hp_args *a, struct hp_out *o)
{
	struct hp_ctx *h = NULL;
	struct hp_topo t;
	struct hp_port *ports[HP_MAX_SLOTS];
	int rc = hp_prepare(a, o, &h, &t, ports, true, true);

	if (!rc)
		rc = hp_add_ports(a, o, h, &t, ports);
	hp_topo_free(&t);
	hp_close(h);
	return rc;
}

/* Why slot i cannot take a drive now: NULL ready; else the reason in msg,
 * *hard set when waiting will not help. */
static const char *not_ready(struct hp_args *a, struct hp_topo *t, struct hp_port *p, const char *id,
			     bool *hard, char *msg, size_t len)
{
	*hard = false;
	if (p->ndrives) {
		const char *dev = p->drive.id[0] ? p->drive.id : p->drive.path;
		if (p->regs && (!hp_power_on(p->sltctl) || hp_pic(p->sltctl) == SLTCTL_IND_BLINK)) {
			snprintf(msg, len, "slot %d (%s) is still being torn down: %s is present and Slot Control "
				 "reads 0x%04x (power %s, indicator %s)", p->slot, p->id, dev, p->sltctl,
				 hp_power_on(p->sltctl) ? "on" : "off", hp_indicator_name(hp_pic(p->sltctl)));
			return msg;
		}
		*hard = true;
		snprintf(msg, len, "slot %d (%s) is occupied by %s", p->slot, p->id, dev);
		return msg;
	}
	if (in_list(t->peripherals, id)) {
		snprintf(msg, len, "device %s still exists (outside slot %d: teardown in progress or a stray "
			 "device)", id, p->slot);
		return msg;
	}
	if (a->force)
		return NULL;
	if (!p->regs) {
		*hard = true;
		snprintf(msg, len, "slot %d (%s): its registers could not be read (use --force)", p->slot, p->id);
		return msg;
	}
	const char *busy = hp_empty_slot_busy(p->sltctl, p->sltsta);
	if (busy) {
		snprintf(msg, len, "slot %d (%s) is still being torn down: %s (Slot Control 0x%04x, Slot Status "
			 "0x%04x)", p->slot, p->id, busy, p->sltctl, p->sltsta);
		return msg;
	}
	return NULL;
}

int hp_add_ports(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *tp,
		 struct hp_port **ports)
{
	struct plan *pl = calloc(HP_MAX_SLOTS, sizeof(*pl));
	struct json_object *nodes = NULL, *blocks = NULL;
	char err[512];
	int rc = 0;

	/* 1. is each slot free and torn down by the guest? (optionally wait) */
	for (int i = 0; i < a->nslots; i++)
		snprintf(pl[i].id, sizeof(pl[i].id), "nvme-s%d", ports[i]->slot);
	for (double t0 = hp_mono();;) {
		char msg[1024] = "";
		const char *why = NULL;
		bool hard = false;
		for (int i = 0; i < a->nslots && !hard; i++) {
			char m[1024];
			bool hd;
			const char *w = not_ready(a, tp, ports[i], pl[i].id, &hd, m, sizeof(m));
			if (w && (hd || !why)) {
				snprintf(msg, sizeof(msg), "%s", m);
				why = msg;
				hard = hd;
			}
		}
		if (!why)
			break;
		if (hard || hp_mono() - t0 >= a->wait) {
			hp_fail(o, "%s%s; nothing changed", why, hard ? "" : a->wait > 0 ? " after waiting" :
				"; retry later or use --wait S");
			rc = HP_EXIT_REFUSED;
			goto out;
		}
		hp_sleep(0.15);
		for (int i = 0; i < a->nslots; i++)
			pl[i].waited = hp_mono() - t0;
		if (hp_topo_reload(h, tp, a, ports, err, sizeof(err))) {
			hp_fail(o, "while waiting: %s; nothing changed", err);
			rc = HP_EXIT_FAILED;
			goto out;
		}
	}

	/* 3. block nodes and serials */
	{
		struct json_object *arg = json_object_new_object();
		json_object_object_add(arg, "flat", json_object_new_boolean(1));
		if (hp_qmp(h, "query-named-block-nodes", arg, &nodes, err, sizeof(err)) ||
		    hp_qmp(h, "query-block", NULL, &blocks, err, sizeof(err))) {
			hp_fail(o, "%s; nothing changed", err);
			rc = HP_EXIT_FAILED;
			goto out;
		}
	}
	for (int i = 0; i < a->nslots; i++) {
		struct hp_port *p = ports[i];
		char user[200];
		snprintf(pl[i].node, sizeof(pl[i].node), "%s", a->node ? a->node : "");
		if (!a->node)
			snprintf(pl[i].node, sizeof(pl[i].node), "drive-s%d", p->slot);
		node_info(nodes, blocks, pl[i].node, &pl[i].node_exists, &pl[i].size, user, sizeof(user));
		if (user[0]) {
			hp_fail(o, "slot %d: block node %s is in use by %s; nothing changed", p->slot, pl[i].node, user);
			rc = HP_EXIT_REFUSED;
			goto out;
		}
		if (a->serial) {
			snprintf(pl[i].serial, sizeof(pl[i].serial), "%s", a->serial);
		} else if (hp_default_serial(h, p->slot, pl[i].serial, sizeof(pl[i].serial), err, sizeof(err))) {
			hp_fail(o, "slot %d: %s; nothing changed", p->slot, err);
			rc = HP_EXIT_REFUSED;
			goto out;
		}
		for (int k = 0; k < i; k++)
			if (!strcmp(pl[k].node, pl[i].node)) {
				hp_fail(o, "slots %d and %d would share block node %s; nothing changed",
					ports[k]->slot, p->slot, pl[i].node);
				rc = HP_EXIT_REFUSED;
				goto out;
			}
	}
	if (a->size_given)
		for (int i = 0; i < a->nslots; i++)
			if (pl[i].node_exists)
				hp_note(o, "slot %d: --size ignored, block node %s exists and is reused", ports[i]->slot,
					pl[i].node);

	/* 4. act */
	for (int i = 0; i < a->nslots; i++) {
		struct hp_port *p = ports[i];
		struct plan *s = &pl[i];
		if (!s->node_exists) {
			struct json_object *arg = json_object_new_object();
			json_object_object_add(arg, "driver", json_object_new_string("null-co"));
			json_object_object_add(arg, "node-name", json_object_new_string(s->node));
			json_object_object_add(arg, "size", json_object_new_int64((int64_t)a->size_mib << 20));
			json_object_object_add(arg, "read-zeroes", json_object_new_boolean(1));
			if (hp_qmp(h, "blockdev-add", arg, NULL, s->err, sizeof(s->err)))
				continue;
			s->created = true;
			s->size = (long long)a->size_mib << 20;
		}
		struct json_object *arg = json_object_new_object();
		json_object_object_add(arg, "driver", json_object_new_string("nvme"));
		json_object_object_add(arg, "id", json_object_new_string(s->id));
		json_object_object_add(arg, "serial", json_object_new_string(s->serial));
		json_object_object_add(arg, "drive", json_object_new_string(s->node));
		json_object_object_add(arg, "bus", json_object_new_string(p->id));
		for (int k = 0; k < a->nprops; k++) {
			char key[48];
			size_t kl = strcspn(a->props[k], "=");
			snprintf(key, sizeof(key), "%.*s", (int)kl, a->props[k]);
			json_object_object_add(arg, key, hp_prop_value(a->props[k] + kl + 1));
		}
		s->added_real = hp_real_ns();
		if (hp_qmp(h, "device_add", arg, NULL, s->err, sizeof(s->err))) {
			if (s->created) {
				struct json_object *d = json_object_new_object();
				char e2[256];
				json_object_object_add(d, "node-name", json_object_new_string(s->node));
				if (!hp_qmp(h, "blockdev-del", d, NULL, e2, sizeof(e2)))
					s->created = false;
			}
			continue;
		}
		s->added = true;
		hp_remember_serial(h, p->slot, s->serial);
	}

	/* 5. report */
	int failed = 0;
	for (int i = 0; i < a->nslots; i++) {
		struct hp_port *p = ports[i];
		struct plan *s = &pl[i];
		struct json_object *j = json_object_new_object();
		json_object_object_add(j, "slot", json_object_new_int(p->slot));
		json_object_object_add(j, "port", json_object_new_string(p->id));
		json_object_object_add(j, "address", json_object_new_string(p->addr));
		json_object_object_add(j, "device", json_object_new_string(s->id));
		json_object_object_add(j, "serial", json_object_new_string(s->serial));
		json_object_object_add(j, "node", json_object_new_string(s->node));
		json_object_object_add(j, "node_reused", json_object_new_boolean(s->node_exists));
		json_object_object_add(j, "size", s->size >= 0 ? json_object_new_int64(s->size) : NULL);
		json_object_object_add(j, "waited_s", hp_num(s->waited, 2));
		if (s->added) {
			json_object_object_add(j, "added_ns", json_object_new_int64(s->added_real));
			if (!hp_port_read_regs(h, tp, p, err, sizeof(err))) {
				json_object_object_add(j, "presence", json_object_new_boolean(p->sltsta & SLTSTA_PDS));
				json_object_object_add(j, "sltctl", hp_hex16(p->sltctl));
				json_object_object_add(j, "sltsta", hp_hex16(p->sltsta));
			}
		}
		json_object_object_add(j, "result", json_object_new_string(s->added ? "added" : "failed"));
		if (s->err[0]) {
			json_object_object_add(j, "error", json_object_new_string(s->err));
			fprintf(stderr, "hpslot: slot %d: %s\n", p->slot, s->err);
			failed++;
		}
		json_object_array_add(o->slots, j);
		if (s->added)
			hp_say(o, "slot %-4d %-7s %s added: serial=%s node=%s (%s%s)\n", p->slot, p->id, s->id, s->serial,
			       s->node, s->node_exists ? "reused" : "new null-co", "");
		else
			hp_say(o, "slot %-4d %-7s %s NOT added: %s\n", p->slot, p->id, s->id, s->err);
	}
	if (failed) {
		hp_fail(o, "%d of %d drive(s) were not added", failed, a->nslots);
		rc = HP_EXIT_FAILED;
	}
out:
	json_object_put(nodes);
	json_object_put(blocks);
	free(pl);
	return rc;
}
