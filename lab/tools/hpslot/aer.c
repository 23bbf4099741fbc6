/* hpslot aer: inject a PCIe AER error into the root port of each SLOT.
 *
 * QEMU's HMP `pcie_aer_inject_error` raises the error in the port's AER
 * capability and signals it to the guest as the port would (the nvme device
 * has no AER capability, so errors aimed at it would be dropped: the root
 * port is the target). Correctable errors are never signalled by QEMU 7.2;
 * --correctable passes -c all the same so a later QEMU is testable. */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

int cmd_aer(struct hp_args *a, struct hp_out *o)
{
	struct hp_ctx *h = NULL;
	struct hp_topo t;
	struct hp_port *ports[HP_MAX_SLOTS];
	int rc = hp_prepare(a, o, &h, &t, ports, true, false), failed = 0;

	json_object_object_add(o->root, "error_injected", json_object_new_string(a->aer_error));
	for (int i = 0; !rc && i < a->nslots; i++) {
		struct json_object *s = json_object_new_object();
		char err[512] = "", *text = NULL;
		long long t0 = hp_real_ns();
		bool ok;

		ok = !hp_hmp(h, &text, err, sizeof(err), "pcie_aer_inject_error %s%s %s",
			     a->aer_correctable ? "-c " : "", ports[i]->id, a->aer_error) &&
		     text && strstr(text, "OK id:") && !hp_hmp_is_error(text);
		if (text)
			text[strcspn(text, "\r\n")] = '\0';
		json_object_object_add(s, "slot", json_object_new_int(ports[i]->slot));
		json_object_object_add(s, "port", json_object_new_string(ports[i]->id));
		json_object_object_add(s, "injected", json_object_new_boolean(ok));
		/* host realtime, as QEMU stamps its events */
		json_object_object_add(s, "at_realtime_ns", json_object_new_int64(t0));
		json_object_object_add(s, "monitor", json_object_new_string(text ? text : err));
		json_object_array_add(o->slots, s);
		if (ok) {
			hp_say(o, "slot %d (%s): %s injected\n", ports[i]->slot, ports[i]->id, a->aer_error);
		} else {
			hp_fail(o, "slot %d (%s): QEMU did not inject %s: %s", ports[i]->slot, ports[i]->id,
				a->aer_error, text && *text ? text : err);
			failed++;
		}
		free(text);
	}
	hp_topo_free(&t);
	hp_close(h);
	return rc ? rc : failed ? HP_EXIT_FAILED : HP_EXIT_OK;
}
