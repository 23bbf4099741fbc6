/* hpslot status: one line a slot. */
#include "hpslot.h"

int cmd_status(struct hp_args *a, struct hp_out *o)
{
	struct hp_ctx *h = NULL;
	struct hp_topo t;
	struct hp_port *ports[HP_MAX_SLOTS];
	int rc = hp_prepare(a, o, &h, &t, ports, false, true);

	if (!rc) {
		int n = a->nslots ? a->nslots : t.nports;
		for (int i = 0; i < n; i++) {
			struct hp_port *p = a->nslots ? ports[i] : &t.ports[i];
			char line[1400];
			json_object_array_add(o->slots, hp_port_json(p));
			hp_port_line(p, line, sizeof(line));
			hp_say(o, "%s\n", line);
		}
		if (!t.nports)
			hp_note(o, "domain %s has no pcie-root-port on pcie.0", a->domain);
	}
	hp_topo_free(&t);
	hp_close(h);
	return rc;
}
