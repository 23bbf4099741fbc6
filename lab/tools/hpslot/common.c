/* Helpers shared by the commands: preparation (the domain, its lock, its
 * topology), serials, reloading the topology. */
#include "hpslot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int hp_prepare(struct hp_args *a, struct hp_out *o, struct hp_ctx **hp, struct hp_topo *t,
	       struct hp_port **ports, bool need_running, bool regs)
{
	char err[1024], qstatus[64];
	bool running;

	memset(t, 0, sizeof(*t));
	const char *why = hp_lock_name_invalid(a->domain);
	if (why) {
		hp_fail(o, "domain name '%s' is refused: %s (hpslot names the domain's lock file after it and "
			"takes [A-Za-z0-9._+-], not starting with '.'); nothing changed", a->domain, why);
		return HP_EXIT_REFUSED;
	}
	*hp = hp_open(a->uri, a->domain, err, sizeof(err));
	if (!*hp) {
		hp_fail(o, "%s", err);
		return strncmp(err, "no domain", 9) ? HP_EXIT_FAILED : HP_EXIT_REFUSED;
	}
	/* Every hpslot pause (a removal, remove --when-masked polling through
	 * 0xCF8) holds the domain's lock: read the state under it, so that
	 * another hpslot's pause of a few ms is not taken for a paused domain.
	 * No lock, no action. A domain left paused by a killed hpslot is
	 * resumed first (its pause line in the lock file says so). */
	/* `hpslot absent` only reads and zeroes QEMU's counters: it never
	 * pauses, so it neither waits for the lock nor resumes anything. */
	bool locks = a->cmd != HP_CMD_ABSENT;
	int rrc = 0;
	hp_lock_set_cmd(hp_cmd_name(a->cmd));
	if (locks && hp_lock(*hp, err, sizeof(err))) {
		hp_fail(o, "%s; nothing changed", err);
		return HP_EXIT_FAILED;
	}
	if (locks)
		rrc = hp_lock_recover(*hp, o);
	const char *st = hp_domain_state(*hp, &running);
	bool qrun = hp_qemu_running(*hp, qstatus, sizeof(qstatus));
	if (locks)
		hp_unlock();
	if (rrc)
		return rrc;
	json_object_object_add(o->root, "state", json_object_new_string(st));
	/* A guest asleep in S3 (its vCPUs stopped until a wake-up) can have a
	 * drive yanked or added: the slot changes while it sleeps. */
	bool asleep = !strcmp(st, "pm-suspended");
	bool acts_asleep = a->cmd == HP_CMD_ADD || (a->cmd == HP_CMD_REMOVE && a->mode == HP_MODE_SURPRISE);
	if (!running && strcmp(st, "paused") && !asleep) {
		hp_fail(o, "domain %s is %s: hpslot needs a running QEMU", a->domain, st);
		return HP_EXIT_REFUSED;
	}
	json_object_object_add(o->root, "qemu_status", json_object_new_string(qstatus));
	if (asleep && acts_asleep && strcmp(qstatus, "suspended")) {
		hp_fail(o, "domain %s is %s but QEMU says %s; nothing changed", a->domain, st, qstatus);
		return HP_EXIT_REFUSED;
	}
	if (need_running && !(asleep && acts_asleep) && (!running || !qrun)) {
		hp_fail(o, "domain %s is %s (QEMU status %s): hpslot %s acts only on a running domain; "
			"nothing changed", a->domain, st, qstatus, hp_cmd_name(a->cmd));
		return HP_EXIT_REFUSED;
	}
	if (hp_topo_load(*hp, t, regs, err, sizeof(err))) {
		hp_fail(o, "cannot read the topology of %s: %s", a->domain, err);
		return HP_EXIT_FAILED;
	}
	if (regs) {
		json_object_object_add(o->root, "config_read",
				       json_object_new_string(t->ecam ? "ecam" : t->nports ? "cf8-paused" : "none"));
		if (t->ecam) {
			char b[32];
			snprintf(b, sizeof(b), "0x%llx", (unsigned long long)t->ecam_base);
			json_object_object_add(o->root, "ecam_base", json_object_new_string(b));
		} else if (t->ecam_note[0]) {
			hp_note(o, "ECAM not used (%s); config space was read with the domain paused", t->ecam_note);
		}
	}
	for (int i = 0; i < a->nslots; i++) {
		ports[i] = hp_topo_find(t, &a->slots[i]);
		if (!ports[i]) {
			char known[1024] = "";
			size_t n = 0;
			for (int k = 0; k < t->nports && n < sizeof(known) - 16; k++)
				n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%d(%s)", k ? " " : "",
						      t->ports[k].slot, t->ports[k].id);
			if (a->slots[i].port[0])
				hp_fail(o, "domain %s has no root port %s on pcie.0 (ports: %s); nothing changed",
					a->domain, a->slots[i].port, t->nports ? known : "none");
			else
				hp_fail(o, "domain %s has no root port with slot %d (slots: %s); nothing changed",
					a->domain, a->slots[i].slot, t->nports ? known : "none");
			return HP_EXIT_REFUSED;
		}
		for (int k = 0; k < i; k++) {
			if (ports[k] == ports[i]) {
				hp_fail(o, "%s and %s name the same slot (%d, %s)", a->slots[k].text,
					a->slots[i].text, ports[i]->slot, ports[i]->id);
				return HP_EXIT_USAGE;
			}
		}
	}
	return 0;
}

/* ---- serials ---------------------------------------------------------- */

void hp_remember_serial(struct hp_ctx *h, int slot, const char *serial)
{
	char *cur = hp_metadata_get(h);
	char next[16384];
	if (serial && *serial && !hp_metadata_set(cur, slot, serial, next, sizeof(next)))
		hp_metadata_put(h, next);
	free(cur);
}

int hp_default_serial(struct hp_ctx *h, int slot, char *out, size_t len, char *err, size_t errlen)
{
	char last[128], id[32], prefix[64];
	char *meta = hp_metadata_get(h), *xml = NULL;
	int rc;

	snprintf(id, sizeof(id), "nvme-s%d", slot);
	rc = hp_metadata_serial(meta, slot, last, sizeof(last));
	free(meta);
	if (rc) {
		xml = hp_domain_xml(h);
		rc = hp_xml_boot_serial(xml, id, last, sizeof(last));
	}
	if (!rc) {
		free(xml);
		if (hp_serial_bump(last, out, len)) {
			snprintf(err, errlen, "the next serial after '%s' would be longer than %d characters: "
				 "give --serial", last, HP_SERIAL_MAX);
			return -1;
		}
		return 0;
	}
	if (hp_xml_serial_prefix(xml, prefix, sizeof(prefix)))
		snprintf(prefix, sizeof(prefix), "hp");
	free(xml);
	char buf[128];
	snprintf(buf, sizeof(buf), "%s-s%d-g0", prefix, slot);
	if (!hp_valid_serial(buf) || strlen(buf) >= len) {
		snprintf(err, errlen, "default serial '%s' is not a valid NVMe serial: give --serial", buf);
		return -1;
	}
	strcpy(out, buf);
	return 0;
}

int hp_topo_reload(struct hp_ctx *h, struct hp_topo *t, struct hp_args *a, struct hp_port **ports,
		   char *err, size_t errlen)
{
	hp_topo_free(t);
	if (hp_topo_load(h, t, true, err, errlen))
		return -1;
	for (int i = 0; i < a->nslots; i++) {
		ports[i] = hp_topo_find(t, &a->slots[i]);
		if (!ports[i]) {
			snprintf(err, errlen, "slot %s disappeared from the topology", a->slots[i].text);
			return -1;
		}
	}
	return 0;
}
