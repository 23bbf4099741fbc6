/* hpslot absent: how many reads reached nothing below each slot, and the
 * guest pcs that made them.
 *
 * The lab's QEMU (qemu/patches/0009) counts them per port in the slot
 * properties x-absent-reads (uint64; set to 0 to reset the count and the
 * pcs) and x-absent-read-pcs ("0x<pc>:<count>,...,other:<n>", read-only).
 * Both are read with qom-get: no pause, no config cycle, so no lock. */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

#define ABSENT_TRIES 5	/* reads of the pair until the pcs add up to the count */

/* The pcs and the count, read until they agree (a read between the two
 * qom-gets makes the count larger than the pcs' sum). 0, or -1 with err. */
static int read_counts(struct hp_ctx *h, const struct hp_port *p, long long *total, struct hp_absent_pc *pcs,
		       int *npcs, bool *consistent, char *err, size_t len)
{
	for (int t = 0; t < ABSENT_TRIES; t++) {
		struct json_object *r = NULL;
		long long sum = 0;

		if (hp_qom_get(h, p->path, "x-absent-read-pcs", &r, err, len))
			return -1;
		const char *s = json_object_is_type(r, json_type_string) ? json_object_get_string(r) : NULL;
		*npcs = hp_parse_absent_pcs(s, pcs, HP_ABSENT_PCS_MAX);
		if (*npcs < 0) {
			snprintf(err, len, "x-absent-read-pcs of %s is not 0x<pc>:<count>,...: %s", p->id,
				 json_object_to_json_string(r));
			json_object_put(r);
			return -1;
		}
		json_object_put(r);
		if (hp_qom_get_int(h, p->path, "x-absent-reads", total, err, len))
			return -1;
		for (int i = 0; i < *npcs; i++)
			sum += pcs[i].count;
		*consistent = sum == *total;
		if (*consistent)
			return 0;
	}
	return 0;
}

static int set_zero(struct hp_ctx *h, const struct hp_port *p, char *err, size_t len)
{
	struct json_object *a = json_object_new_object();

	json_object_object_add(a, "path", json_object_new_string(p->path));
	json_object_object_add(a, "property", json_object_new_string("x-absent-reads"));
	json_object_object_add(a, "value", json_object_new_int(0));
	return hp_qmp(h, "qom-set", a, NULL, err, len);
}

int cmd_absent(struct hp_args *a, struct hp_out *o)
{
	struct hp_ctx *h = NULL;
	struct hp_topo t;
	struct hp_port *ports[HP_MAX_SLOTS];
	int rc = hp_prepare(a, o, &h, &t, ports, false, false), failed = 0;
	int n = rc ? 0 : a->nslots ? a->nslots : t.nports;

	json_object_object_add(o->root, "reset", json_object_new_boolean(a->absent_reset));
	if (!rc && !n)
		hp_note(o, "domain %s has no PCIe root or downstream port", a->domain);
	for (int i = 0; !rc && i < n; i++) {
		struct hp_port *p = a->nslots ? ports[i] : &t.ports[i];
		struct hp_absent_pc pcs[HP_ABSENT_PCS_MAX];
		char err[512] = "";
		long long timeout_us = 0, total = 0;
		int npcs = 0;
		bool consistent = true;

		if (hp_qom_get_int(h, p->path, "x-completion-timeout-us", &timeout_us, err, sizeof(err))) {
			if (strstr(err, "not found")) {
				/* Debian's QEMU: nothing to read on any port */
				hp_fail(o, "domain %s runs a QEMU without the lab's slot properties (%s: %s): "
					"hpslot absent needs the lab's QEMU, lab_platform=fidelity "
					"(qemu/patches/0009); nothing was read", a->domain, p->id, err);
				rc = HP_EXIT_REFUSED;
				break;
			}
		}
		struct json_object *s = json_object_new_object();
		json_object_object_add(s, "slot", json_object_new_int(p->slot));
		json_object_object_add(s, "port", json_object_new_string(p->id));
		json_object_object_add(s, "address", json_object_new_string(p->addr));
		json_object_object_add(s, "kind", json_object_new_string(p->downstream ? "switch-downstream-port" :
									 "root-port"));
		json_object_array_add(o->slots, s);
		if (err[0]) {
			hp_fail(o, "slot %d (%s): %s", p->slot, p->id, err);
			json_object_object_add(s, "error", json_object_new_string(err));
			failed++;
			continue;
		}
		json_object_object_add(s, "completion_timeout_us", json_object_new_int64(timeout_us));
		json_object_object_add(s, "counting", json_object_new_boolean(timeout_us >= 0));
		if (read_counts(h, p, &total, pcs, &npcs, &consistent, err, sizeof(err))) {
			if (strstr(err, "not found")) {
				/* a QEMU with 0003 but not 0009 */
				hp_fail(o, "domain %s runs a QEMU without x-absent-reads (%s: %s): hpslot absent "
					"needs the lab's QEMU with qemu/patches/0009 (lab_platform=fidelity); "
					"nothing was read", a->domain, p->id, err);
				rc = HP_EXIT_REFUSED;
				break;
			}
			hp_fail(o, "slot %d (%s): %s", p->slot, p->id, err);
			json_object_object_add(s, "error", json_object_new_string(err));
			failed++;
			continue;
		}
		if (timeout_us < 0) {
			/* QEMU counts nothing there: a zero would be a lie */
			json_object_object_add(s, "absent_reads", NULL);
			json_object_object_add(s, "absent_read_pcs", NULL);
			snprintf(err, sizeof(err), "x-completion-timeout-us is %lld: QEMU counts no reads on this "
				 "port (set it to 0 or more)", timeout_us);
			hp_fail(o, "slot %d (%s): %s", p->slot, p->id, err);
			json_object_object_add(s, "error", json_object_new_string(err));
			failed++;
		} else {
			struct json_object *arr = json_object_new_array();
			json_object_object_add(s, "absent_reads", json_object_new_int64(total));
			for (int k = 0; k < npcs; k++) {
				struct json_object *e = json_object_new_object();
				json_object_object_add(e, "pc", json_object_new_string(pcs[k].pc));
				json_object_object_add(e, "count", json_object_new_int64(pcs[k].count));
				json_object_array_add(arr, e);
			}
			json_object_object_add(s, "absent_read_pcs", arr);
			if (!consistent)
				hp_note(o, "slot %d (%s): reads kept coming in while hpslot read the count: the pcs "
					"add up to less than absent_reads", p->slot, p->id);
			char line[1024];
			size_t l = (size_t)snprintf(line, sizeof(line), "slot %-4d %-7s %lld read(s) reached nothing",
						    p->slot, p->id, total);
			for (int k = 0; k < npcs && l < sizeof(line); k++)
				l += (size_t)snprintf(line + l, sizeof(line) - l, "%s%s x%lld", k ? ", " : ": ",
						      pcs[k].pc, pcs[k].count);
			hp_say(o, "%s%s\n", line, a->absent_reset ? " (reset)" : "");
		}
		if (a->absent_reset) {
			bool ok = !set_zero(h, p, err, sizeof(err));
			json_object_object_add(s, "reset", json_object_new_boolean(ok));
			if (!ok) {
				hp_fail(o, "slot %d (%s): resetting x-absent-reads: %s", p->slot, p->id, err);
				json_object_object_add(s, "error", json_object_new_string(err));
				failed++;
			}
		}
	}
	hp_topo_free(&t);
	hp_close(h);
	return rc ? rc : failed ? HP_EXIT_FAILED : HP_EXIT_OK;
}
