/* The PCI tree as the guest enumerated it, from QMP query-pci: QEMU lists
 * the functions on each bus and, for a bridge, the functions on its
 * secondary bus nested inside it (pci_bridge.devices). Flattened here so
 * that a port below a switch has its own bus number for config cycles and
 * knows the root port above it. Pure (no libvirt): unit-tested. */
#include "hpslot.h"

#include <string.h>

/* KEY of O as an integer, DFLT when absent or not a number. */
long long hp_jint(struct json_object *o, const char *key, long long dflt)
{
	struct json_object *x;
	if (o && json_object_object_get_ex(o, key, &x) &&
	    (json_object_is_type(x, json_type_int) || json_object_is_type(x, json_type_double)))
		return json_object_get_int64(x);
	return dflt;
}

static int walk(struct json_object *devs, int bus, int parent, struct hp_pcidev *out, int n, int max)
{
	for (size_t i = 0; devs && i < json_object_array_length(devs); i++) {
		struct json_object *d = json_object_array_get_idx(devs, i), *x, *b;
		if (n >= max)
			return -1;
		struct hp_pcidev *p = &out[n];
		int self = n++;

		memset(p, 0, sizeof(*p));
		if (json_object_object_get_ex(d, "qdev_id", &x) && json_object_is_type(x, json_type_string))
			snprintf(p->qdev, sizeof(p->qdev), "%s", json_object_get_string(x));
		p->bus = (int)hp_jint(d, "bus", bus);
		p->dev = (int)hp_jint(d, "slot", -1);
		p->fn = (int)hp_jint(d, "function", -1);
		p->parent = parent;
		p->secondary = p->subordinate = -1;
		if (json_object_object_get_ex(d, "id", &x))
			p->ids = (uint32_t)hp_jint(x, "vendor", 0) | (uint32_t)hp_jint(x, "device", 0) << 16;
		if (!json_object_object_get_ex(d, "pci_bridge", &x))
			continue;
		if (json_object_object_get_ex(x, "bus", &b)) {
			p->secondary = (int)hp_jint(b, "secondary", -1);
			p->subordinate = (int)hp_jint(b, "subordinate", -1);
		}
		/* QEMU nests the devices of a bridge whose secondary bus the guest
		 * has numbered (before that, every bridge's secondary bus is 0) */
		if (json_object_object_get_ex(x, "devices", &b) && p->secondary > 0) {
			n = walk(b, p->secondary, self, out, n, max);
			if (n < 0)
				return -1;
		}
	}
	return n;
}

int hp_pci_flatten(struct json_object *query_pci, struct hp_pcidev *out, int max)
{
	int n = 0;

	if (!query_pci || !json_object_is_type(query_pci, json_type_array))
		return -1;
	for (size_t i = 0; i < json_object_array_length(query_pci); i++) {
		struct json_object *b = json_object_array_get_idx(query_pci, i), *devs;
		if (!json_object_object_get_ex(b, "devices", &devs))
			continue;
		n = walk(devs, (int)hp_jint(b, "bus", 0), -1, out, n, max);
		if (n < 0)
			return -1;
	}
	return n;
}

int hp_pci_find(const struct hp_pcidev *d, int n, const char *qdev)
{
	for (int i = 0; qdev && *qdev && i < n; i++)
		if (!strcmp(d[i].qdev, qdev))
			return i;
	return -1;
}

int hp_pci_root(const struct hp_pcidev *d, int n, int i)
{
	int guard = n;

	if (i < 0 || i >= n)
		return -1;
	while (d[i].parent >= 0 && guard-- > 0)
		i = d[i].parent;
	return guard < 0 ? -1 : i;
}

void hp_bdf(int bus, int dev, int fn, char *buf, size_t len)
{
	snprintf(buf, len, "%02x:%02x.%d", bus < 0 ? 0 : bus, dev < 0 ? 0 : dev, fn < 0 ? 0 : fn);
}
