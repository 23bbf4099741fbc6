/* Helpers shared by the commands: preparation, output, pausing, serials. */
#include "hpslot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void add_msg(struct hp_out *o, const char *key, const char *msg)
{
	struct json_object *arr;
	if (!json_object_object_get_ex(o->root, key, &arr)) {
		arr = json_object_new_array();
		json_object_object_add(o->root, key, arr);
	}
	json_object_array_add(arr, json_object_new_string(msg));
}

void hp_fail(struct hp_out *o, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!json_object_object_get_ex(o->root, "error", NULL))
		json_object_object_add(o->root, "error", json_object_new_string(msg));
	else
		add_msg(o, "errors", msg);
	fprintf(stderr, "hpslot: %s\n", msg);
}

void hp_note(struct hp_out *o, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	add_msg(o, "notes", msg);
	if (!o->a->json)
		printf("note: %s\n", msg);
}

void hp_say(struct hp_out *o, const char *fmt, ...)
{
	va_list ap;
	if (o->a->json)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

/* While the VM is stopped (or a slot half-written) a terminating signal must
 * wait until the domain runs again. Blocking signals is not enough: libvirt's
 * event thread would take them. So handlers record the signal during a
 * critical section and re-raise it at its end. */
static volatile sig_atomic_t in_critical, pending_sig;

static void on_signal(int sig)
{
	if (in_critical) {
		pending_sig = sig;
		return;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void hp_signals_install(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGALRM, SIGUSR1, SIGUSR2 };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

void hp_signals_block(bool block)
{
	if (block) {
		in_critical++;
		return;
	}
	if (in_critical > 0 && --in_critical == 0 && pending_sig) {
		int sig = pending_sig;
		pending_sig = 0;
		fprintf(stderr, "hpslot: signal %d arrived while the domain was paused; resumed, now exiting\n", sig);
		signal(sig, SIG_DFL);
		raise(sig);
	}
}

int hp_vm_stop(struct hp_ctx *h, char *err, size_t errlen)
{
	return hp_qmp(h, "stop", NULL, NULL, err, errlen);
}

int hp_vm_cont(struct hp_ctx *h, char *err, size_t errlen)
{
	/* Resuming is the one thing that must not be skipped: retry a little. */
	for (int i = 0; i < 5; i++) {
		if (!hp_qmp(h, "cont", NULL, NULL, err, errlen))
			return 0;
		hp_sleep(0.2);
	}
	fprintf(stderr, "hpslot: COULD NOT RESUME domain %s (%s): run `virsh resume %s`\n",
		hp_domain_name(h), err, hp_domain_name(h));
	return -1;
}

bool hp_qemu_running(struct hp_ctx *h, char *status, size_t len)
{
	struct json_object *r, *x;
	char err[256];
	bool running = false;

	snprintf(status, len, "unknown");
	if (hp_qmp(h, "query-status", NULL, &r, err, sizeof(err)))
		return false;
	if (json_object_object_get_ex(r, "status", &x))
		snprintf(status, len, "%s", json_object_get_string(x));
	if (json_object_object_get_ex(r, "running", &x))
		running = json_object_get_boolean(x);
	json_object_put(r);
	return running;
}

/* Pauses and 0xCF8/0xCFC sequences of two hpslot processes on one domain
 * must not interleave: a per-domain flock around each of them (the lock
 * dies with the process). */
static int lock_fd = -1, lock_depth;

int hp_lock(struct hp_ctx *h, char *err, size_t len)
{
	char path[512];
	const char *domain = hp_domain_name(h);

	if (lock_depth++)
		return 0;
	snprintf(path, sizeof(path), "/run/lock/hpslot.");
	for (const char *c = domain; *c && strlen(path) < sizeof(path) - 8; c++) {
		size_t n = strlen(path);
		path[n] = (*c == '/' ? '_' : *c);
		path[n + 1] = 0;
	}
	strcat(path, ".lock");
	lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lock_fd < 0)
		return 0;	/* no lock directory: go on unlocked */
	for (double t0 = hp_mono();; hp_sleep(0.01)) {
		if (!flock(lock_fd, LOCK_EX | LOCK_NB))
			return 0;
		if (errno != EWOULDBLOCK || hp_mono() - t0 > 30) {
			snprintf(err, len, "another hpslot holds %s (30 s)", path);
			close(lock_fd);
			lock_fd = -1;
			lock_depth--;
			return -1;
		}
	}
}

void hp_unlock(void)
{
	if (lock_depth > 0 && --lock_depth == 0 && lock_fd >= 0) {
		flock(lock_fd, LOCK_UN);
		close(lock_fd);
		lock_fd = -1;
	}
}

int hp_prepare(struct hp_args *a, struct hp_out *o, struct hp_ctx **hp, struct hp_topo *t,
	       struct hp_port **ports, bool need_running, bool regs)
{
	char err[1024], qstatus[64];
	bool running;

	memset(t, 0, sizeof(*t));
	*hp = hp_open(a->uri, a->domain, err, sizeof(err));
	if (!*hp) {
		hp_fail(o, "%s", err);
		return strncmp(err, "no domain", 9) ? HP_EXIT_FAILED : HP_EXIT_REFUSED;
	}
	/* Every hpslot pause (a removal, remove --when-masked polling through
	 * 0xCF8) holds the domain's lock: read the state under it, so that
	 * another hpslot's pause of a few ms is not taken for a paused domain. */
	char lerr[256];
	bool locked = need_running && !hp_lock(*hp, lerr, sizeof(lerr));
	const char *st = hp_domain_state(*hp, &running);
	bool qrun = hp_qemu_running(*hp, qstatus, sizeof(qstatus));
	if (locked)
		hp_unlock();
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

/* ---- sub-commands (swap, storm) ---------------------------------------- */

void hp_out_init(struct hp_out *o, struct hp_args *a)
{
	memset(o, 0, sizeof(*o));
	o->a = a;
	o->root = json_object_new_object();
	o->slots = json_object_new_array();
	json_object_object_add(o->root, "slots", json_object_get(o->slots));
}

void hp_out_free(struct hp_out *o)
{
	json_object_put(o->slots);
	json_object_put(o->root);
	o->slots = o->root = NULL;
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
