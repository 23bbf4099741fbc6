/* hpslot remove --orderly [--cancel] | --surprise: the command's entry point
 * (the slots' checks, then surprise.c or orderly.c; the pause is in pause.c,
 * what both modes share in slotops.c). */
#include "hpslot.h"

int cmd_remove(struct hp_args *a, struct hp_out *o)
{
	struct hp_ctx *h = NULL;
	struct hp_topo t;
	struct hp_port *ports[HP_MAX_SLOTS];
	int rc = hp_prepare(a, o, &h, &t, ports, true, true);

	if (rc) {
		json_object_object_add(o->root, "mode",
				       json_object_new_string(a->mode == HP_MODE_SURPRISE ? "surprise" : "orderly"));
	} else {
		rc = hp_remove_ports(a, o, h, &t, ports);
	}
	hp_topo_free(&t);
	hp_close(h);
	return rc;
}

int hp_remove_ports(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *tp,
		    struct hp_port **ports)
{
	int rc = 0;

	json_object_object_add(o->root, "mode",
			       json_object_new_string(a->mode == HP_MODE_SURPRISE ? "surprise" : "orderly"));
	for (int i = 0; i < a->nslots; i++) {
		struct hp_port *p = ports[i];
		if (!p->ndrives) {
			hp_fail(o, "slot %d (%s) holds no drive; nothing changed", p->slot, p->id);
			rc = HP_EXIT_REFUSED;
			goto out;
		}
		if (!p->regs) {
			hp_fail(o, "slot %d (%s): its slot registers could not be read; nothing changed", p->slot, p->id);
			rc = HP_EXIT_REFUSED;
			goto out;
		}
		if (a->mode == HP_MODE_ORDERLY && hp_pic(p->sltctl) == SLTCTL_IND_BLINK) {
			hp_fail(o, "slot %d (%s): the guest is busy with it (power indicator blinking: a removal "
				"or add is in progress); nothing changed", p->slot, p->id);
			rc = HP_EXIT_REFUSED;
			goto out;
		}
		if (a->mode == HP_MODE_ORDERLY && a->cancel && !hp_power_on(p->sltctl)) {
			hp_fail(o, "slot %d (%s) is powered off: device_del would unplug at once, there is "
				"nothing to cancel; nothing changed", p->slot, p->id);
			rc = HP_EXIT_REFUSED;
			goto out;
		}
	}
	/* remember the serials, so `hpslot add` can bump them */
	for (int i = 0; i < a->nslots; i++)
		if (ports[i]->drive.serial[0])
			hp_remember_serial(h, ports[i]->slot, ports[i]->drive.serial);

	/* --cancel changes Slot Control for seconds: hold signals back until it is restored */
	if (a->cancel)
		hp_signals_block(true);
	rc = a->mode == HP_MODE_SURPRISE ? surprise(a, o, h, tp, ports) : orderly(a, o, h, tp, ports);
	if (a->cancel)
		hp_signals_block(false);
out:
	return rc;
}
