/* hpslot: entry point, one JSON object (--json) or text lines. */
#include "hpslot.h"

#include <signal.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct hp_args a;
	char err[512];
	int rc;

	hp_signals_install();
	if (hp_parse_args(argc, argv, &a, err, sizeof(err))) {
		fprintf(stderr, "hpslot: %s\n", err);
		if (a.json) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "ok", json_object_new_boolean(0));
			json_object_object_add(o, "error", json_object_new_string(err));
			json_object_object_add(o, "exit", json_object_new_int(HP_EXIT_USAGE));
			puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
			json_object_put(o);
		} else {
			fprintf(stderr, "usage: hpslot [-c URI] [--json] status|remove|add|swap|storm|aer|absent ... (hpslot --help)\n");
		}
		return HP_EXIT_USAGE;
	}
	if (a.help) {
		hp_cmd_help(stdout, a.cmd);
		return HP_EXIT_OK;
	}

	struct hp_out o = { &a, json_object_new_object(), json_object_new_array(), NULL, NULL };
	json_object_object_add(o.root, "command", json_object_new_string(hp_cmd_name(a.cmd)));
	json_object_object_add(o.root, "domain", json_object_new_string(a.domain));
	json_object_object_add(o.root, "uri", json_object_new_string(a.uri));
	json_object_object_add(o.root, "slots", json_object_get(o.slots));
	switch (a.cmd) {
	case HP_CMD_STATUS: rc = cmd_status(&a, &o); break;
	case HP_CMD_REMOVE: rc = cmd_remove(&a, &o); break;
	case HP_CMD_ADD: rc = cmd_add(&a, &o); break;
	case HP_CMD_SWAP: rc = cmd_swap(&a, &o); break;
	case HP_CMD_STORM: rc = cmd_storm(&a, &o); break;
	case HP_CMD_AER: rc = cmd_aer(&a, &o); break;
	case HP_CMD_ABSENT: rc = cmd_absent(&a, &o); break;
	default: rc = HP_EXIT_USAGE;
	}
	json_object_object_add(o.root, "ok", json_object_new_boolean(rc == 0));
	json_object_object_add(o.root, "exit", json_object_new_int(rc));
	if (a.json)
		puts(json_object_to_json_string_ext(o.root, JSON_C_TO_STRING_PLAIN));
	fflush(stdout);
	json_object_put(o.slots);
	json_object_put(o.root);
	return rc;
}
