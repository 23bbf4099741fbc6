/* libvirt connection, QMP/HMP pass-through and QEMU monitor events. */
#include "hpslot.h"

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_EVENTS 1024
#define META_URI "https://pciehp-lab.invalid/hpslot/1"
#define META_KEY "hpslot"

struct hp_ctx {
	virConnectPtr conn;
	virDomainPtr dom;
	char name[256];
	int cb_id;
	pthread_t thread;
	bool thread_running;
	volatile int quit;
	int timer;
	pthread_mutex_t lock;
	struct hp_event ev[MAX_EVENTS];
	int nev;
	bool debug;	/* HPSLOT_DEBUG: log every monitor command to stderr */
	double t0;
};

double hp_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

long long hp_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

long long hp_real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void hp_sleep(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) == -1)
		;
}

static void quiet_errors(void *opaque, virErrorPtr err)
{
	(void)opaque;
	(void)err;
}

static void lv_err(char *err, size_t len, const char *what)
{
	const char *m = virGetLastErrorMessage();
	snprintf(err, len, "%s: %s", what, m && *m ? m : "unknown libvirt error");
}

static void on_event(virConnectPtr conn, virDomainPtr dom, const char *event, long long seconds,
		     unsigned int micros, const char *details, void *opaque)
{
	struct hp_ctx *h = opaque;
	struct hp_event e;

	(void)conn;
	(void)dom;
	memset(&e, 0, sizeof(e));
	snprintf(e.name, sizeof(e.name), "%s", event);
	e.ts_us = seconds * 1000000LL + micros;
	if (details) {
		struct json_object *d = json_tokener_parse(details), *x;
		if (d && json_object_object_get_ex(d, "device", &x))
			snprintf(e.device, sizeof(e.device), "%s", json_object_get_string(x));
		if (d && json_object_object_get_ex(d, "path", &x))
			snprintf(e.path, sizeof(e.path), "%s", json_object_get_string(x));
		json_object_put(d);
	}
	pthread_mutex_lock(&h->lock);
	if (h->nev < MAX_EVENTS)
		h->ev[h->nev++] = e;
	pthread_mutex_unlock(&h->lock);
}

static void tick(int timer, void *opaque)
{
	(void)timer;
	(void)opaque;
}

static void *event_loop(void *opaque)
{
	struct hp_ctx *h = opaque;
	while (!h->quit)
		if (virEventRunDefaultImpl() < 0)
			break;
	return NULL;
}

struct hp_ctx *hp_open(const char *uri, const char *domain, char *err, size_t errlen)
{
	static bool inited;
	struct hp_ctx *h = calloc(1, sizeof(*h));

	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&h->lock, NULL);
	h->debug = getenv("HPSLOT_DEBUG") != NULL;
	h->t0 = hp_mono();
	h->cb_id = -1;
	h->timer = -1;
	virSetErrorFunc(NULL, quiet_errors);
	if (!inited) {
		if (virInitialize() < 0 || virEventRegisterDefaultImpl() < 0) {
			lv_err(err, errlen, "libvirt initialisation failed");
			free(h);
			return NULL;
		}
		inited = true;
	}
	h->conn = virConnectOpen(uri);
	if (!h->conn) {
		lv_err(err, errlen, "cannot connect to libvirt");
		snprintf(err + strlen(err), errlen - strlen(err),
			 " (URI %s; is libvirtd running? start it with lab/tools/libvirt-up)", uri);
		free(h);
		return NULL;
	}
	h->dom = virDomainLookupByName(h->conn, domain);
	if (!h->dom) {
		virErrorPtr e = virGetLastError();
		if (e && e->code == VIR_ERR_NO_DOMAIN)
			snprintf(err, errlen, "no domain named '%s' on %s", domain, uri);
		else
			lv_err(err, errlen, "domain lookup failed");
		virConnectClose(h->conn);
		free(h);
		return NULL;
	}
	snprintf(h->name, sizeof(h->name), "%s", domain);
	/* Monitor events (DEVICE_DELETED, STOP, RESUME) with QEMU's timestamps;
	 * optional: everything also works by polling. */
	h->cb_id = virConnectDomainQemuMonitorEventRegister(h->conn, h->dom, NULL, on_event, h, NULL, 0);
	if (h->cb_id >= 0) {
		h->timer = virEventAddTimeout(50, tick, NULL, NULL);
		if (pthread_create(&h->thread, NULL, event_loop, h) == 0)
			h->thread_running = true;
	}
	return h;
}

void hp_close(struct hp_ctx *h)
{
	if (!h)
		return;
	if (h->cb_id >= 0)
		virConnectDomainQemuMonitorEventDeregister(h->conn, h->cb_id);
	if (h->thread_running) {
		h->quit = 1;
		pthread_join(h->thread, NULL);
	}
	if (h->timer >= 0)
		virEventRemoveTimeout(h->timer);
	virDomainFree(h->dom);
	virConnectClose(h->conn);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

const char *hp_domain_name(struct hp_ctx *h)
{
	return h->name;
}

int hp_events(struct hp_ctx *h, struct hp_event *out, int max)
{
	pthread_mutex_lock(&h->lock);
	int n = h->nev < max ? h->nev : max;
	memcpy(out, h->ev, sizeof(*out) * (size_t)n);
	pthread_mutex_unlock(&h->lock);
	return n;
}

int hp_qmp(struct hp_ctx *h, const char *cmd, struct json_object *args, struct json_object **ret,
	   char *err, size_t errlen)
{
	struct json_object *req = json_object_new_object(), *reply, *x;
	char *result = NULL;
	int rc = -1;

	if (ret)
		*ret = NULL;
	double t1 = hp_mono();

	json_object_object_add(req, "execute", json_object_new_string(cmd));
	if (args)
		json_object_object_add(req, "arguments", args);
	if (virDomainQemuMonitorCommand(h->dom, json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN),
					&result, 0) < 0) {
		char what[96];
		snprintf(what, sizeof(what), "QMP %s", cmd);
		lv_err(err, errlen, what);
		json_object_put(req);
		return -1;
	}
	if (h->debug)
		fprintf(stderr, "hpslot-debug %.6f > %s\nhpslot-debug %.6f < %s\n", t1 - h->t0,
			json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN), hp_mono() - h->t0, result);
	json_object_put(req);
	reply = json_tokener_parse(result);
	if (!reply) {
		snprintf(err, errlen, "QMP %s: unparsable reply", cmd);
	} else if (json_object_object_get_ex(reply, "error", &x)) {
		struct json_object *d;
		snprintf(err, errlen, "QMP %s: %s", cmd,
			 json_object_object_get_ex(x, "desc", &d) ? json_object_get_string(d) : "error");
	} else if (json_object_object_get_ex(reply, "return", &x)) {
		if (ret)
			*ret = json_object_get(x);
		rc = 0;
	} else {
		snprintf(err, errlen, "QMP %s: reply without return", cmd);
	}
	json_object_put(reply);
	free(result);
	return rc;
}

int hp_qom_get(struct hp_ctx *h, const char *path, const char *prop, struct json_object **ret, char *err,
	       size_t len)
{
	struct json_object *a = json_object_new_object();

	json_object_object_add(a, "path", json_object_new_string(path));
	json_object_object_add(a, "property", json_object_new_string(prop));
	return hp_qmp(h, "qom-get", a, ret, err, len);
}

int hp_qom_get_int(struct hp_ctx *h, const char *path, const char *prop, long long *v, char *err, size_t len)
{
	struct json_object *r = NULL;

	if (hp_qom_get(h, path, prop, &r, err, len))
		return -1;
	if (!json_object_is_type(r, json_type_int)) {
		snprintf(err, len, "qom-get %s %s: not a number: %s", path, prop, json_object_to_json_string(r));
		json_object_put(r);
		return -1;
	}
	*v = json_object_get_int64(r);
	json_object_put(r);
	return 0;
}

int hp_hmp(struct hp_ctx *h, char **out, char *err, size_t errlen, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	struct json_object *args = json_object_new_object(), *ret;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	*out = NULL;
	/* human-monitor-command through QMP: measurably faster than libvirt's
	 * HMP mode (VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP), which matters inside
	 * the surprise-removal pause */
	json_object_object_add(args, "command-line", json_object_new_string(line));
	if (hp_qmp(h, "human-monitor-command", args, &ret, err, errlen)) {
		char msg[600];
		snprintf(msg, sizeof(msg), "HMP '%s': %s", line, err);
		snprintf(err, errlen, "%s", msg);
		return -1;
	}
	*out = strdup(json_object_is_type(ret, json_type_string) ? json_object_get_string(ret) : "");
	json_object_put(ret);
	return 0;
}

const char *hp_domain_state(struct hp_ctx *h, bool *running)
{
	int state = 0, reason = 0;
	*running = false;
	if (virDomainGetState(h->dom, &state, &reason, 0) < 0)
		return "unknown";
	switch (state) {
	case VIR_DOMAIN_RUNNING: *running = true; return "running";
	case VIR_DOMAIN_BLOCKED: *running = true; return "blocked";
	case VIR_DOMAIN_PAUSED: return "paused";
	case VIR_DOMAIN_SHUTDOWN: return "shutting-down";
	case VIR_DOMAIN_SHUTOFF: return "shut-off";
	case VIR_DOMAIN_CRASHED: return "crashed";
	case VIR_DOMAIN_PMSUSPENDED: return "pm-suspended";
	default: return "unknown";
	}
}

char *hp_domain_xml(struct hp_ctx *h)
{
	return virDomainGetXMLDesc(h->dom, 0);
}

char *hp_metadata_get(struct hp_ctx *h)
{
	return virDomainGetMetadata(h->dom, VIR_DOMAIN_METADATA_ELEMENT, META_URI, VIR_DOMAIN_AFFECT_LIVE);
}

int hp_metadata_put(struct hp_ctx *h, const char *xml)
{
	return virDomainSetMetadata(h->dom, VIR_DOMAIN_METADATA_ELEMENT, xml, META_KEY, META_URI,
				    VIR_DOMAIN_AFFECT_LIVE);
}
