/* hpslot remove: what the surprise and the orderly removal share (swap and
 * storm use some too): Slot Control through 0xCF8/0xCFC (domain paused),
 * device_del and whether a drive is still there, QEMU's event times, the
 * per-slot JSON record. */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

#define MAX_EV 1024

int slot_read(struct hp_ctx *h, struct hp_port *p, uint16_t *ctl, uint16_t *sta, char *err, size_t len)
{
	uint32_t v;
	if (hp_cfg_read32(h, p->bus, p->dev, p->fn, p->exp + EXP_SLTCTL, &v, err, len))
		return -1;
	*ctl = (uint16_t)v;
	*sta = (uint16_t)(v >> 16);
	return 0;
}

/* after slot_read, 0xCF8 still addresses the Slot Control dword */
int slot_write_here(struct hp_ctx *h, struct hp_port *p, uint16_t val, char *err, size_t len)
{
	return hp_cfg_write16(h, p->exp + EXP_SLTCTL, val, err, len);
}

int slot_write(struct hp_ctx *h, struct hp_port *p, uint16_t val, char *err, size_t len)
{
	if (hp_cf8_set(h, hp_cf8_address(p->bus, p->dev, p->fn, p->exp + EXP_SLTCTL), err, len))
		return -1;
	return slot_write_here(h, p, val, err, len);
}

const char *dev_ref(const struct hp_port *p)
{
	return p->drive.id[0] ? p->drive.id : p->drive.path;
}

int hp_device_del(struct hp_ctx *h, const char *id, char *err, size_t len)
{
	struct json_object *a = json_object_new_object();
	json_object_object_add(a, "id", json_object_new_string(id));
	return hp_qmp(h, "device_del", a, NULL, err, len);
}

int device_del(struct hp_ctx *h, const char *id, char *err, size_t len)
{
	return hp_device_del(h, id, err, len);
}

int hp_device_present(struct hp_ctx *h, const char *qom_path)
{
	struct json_object *a = json_object_new_object(), *r;
	char err[256];

	json_object_object_add(a, "path", json_object_new_string(qom_path));
	json_object_object_add(a, "property", json_object_new_string("type"));
	if (hp_qmp(h, "qom-get", a, &r, err, sizeof(err)))
		return strstr(err, "not found") ? 0 : -1;
	json_object_put(r);
	return 1;
}

/* Is the port's drive (by its QOM path) still there? 1 yes, 0 no, -1 unknown. */
int device_present(struct hp_ctx *h, const struct hp_port *p)
{
	return hp_device_present(h, p->drive.path);
}

long long hp_event_ts(struct hp_ctx *h, const char *name, const char *device, long long after_real_ns, int nth)
{
	struct hp_event *ev = calloc(MAX_EV, sizeof(*ev));
	long long ts = -1;
	int n = hp_events(h, ev, MAX_EV), seen = 0;
	for (int i = 0; i < n; i++) {
		if (strcmp(ev[i].name, name))
			continue;
		if (device && strcmp(ev[i].device, device) && strcmp(ev[i].path, device))
			continue;
		if (ev[i].ts_us * 1000 < after_real_ns - 1000000)	/* 1 ms slack */
			continue;
		if (++seen < (nth > 0 ? nth : 1))
			continue;
		ts = ev[i].ts_us * 1000;
		break;
	}
	free(ev);
	return ts;
}

long long event_ts_ns(struct hp_ctx *h, const char *name, const char *device, long long after_real_ns)
{
	return hp_event_ts(h, name, device, after_real_ns, 1);
}

struct json_object *slot_base(const struct hp_port *p)
{
	struct json_object *s = json_object_new_object();
	json_object_object_add(s, "slot", json_object_new_int(p->slot));
	json_object_object_add(s, "port", json_object_new_string(p->id));
	json_object_object_add(s, "address", json_object_new_string(p->addr));
	json_object_object_add(s, "device", json_object_new_string(dev_ref(p)));
	json_object_object_add(s, "serial", p->drive.serial[0] ? json_object_new_string(p->drive.serial) : NULL);
	json_object_object_add(s, "node", p->drive.node[0] ? json_object_new_string(p->drive.node) : NULL);
	return s;
}

void set_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, json_object_new_string(v));
}
