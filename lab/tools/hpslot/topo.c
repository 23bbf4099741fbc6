/* Discovery: root ports, their slot numbers and addresses, the devices in
 * them and their block nodes, and the slot registers -- all from QEMU. */
#include "hpslot.h"

#include <stdlib.h>
#include <string.h>

#define PERIPH "/machine/peripheral"
#define PERIPH_ANON "/machine/peripheral-anon"

static bool is_port_type(const char *type)
{
	/* "child<pcie-root-port>"; ioh3420 is the other root port model;
	 * xio3130-downstream is a switch's downstream port (a JBOF slot) */
	return !strcmp(type, "child<pcie-root-port>") || !strcmp(type, "child<ioh3420>") ||
	       !strcmp(type, "child<xio3130-downstream>");
}

static int qom_get(struct hp_ctx *h, const char *path, const char *prop, struct json_object **ret,
		   char *err, size_t errlen)
{
	struct json_object *a = json_object_new_object();
	json_object_object_add(a, "path", json_object_new_string(path));
	json_object_object_add(a, "property", json_object_new_string(prop));
	return hp_qmp(h, "qom-get", a, ret, err, errlen);
}

static int qom_list(struct hp_ctx *h, const char *path, struct json_object **ret, char *err, size_t errlen)
{
	struct json_object *a = json_object_new_object();
	json_object_object_add(a, "path", json_object_new_string(path));
	return hp_qmp(h, "qom-list", a, ret, err, errlen);
}

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *x;
	if (o && json_object_object_get_ex(o, key, &x) && json_object_is_type(x, json_type_string))
		return json_object_get_string(x);
	return NULL;
}

bool hp_peripheral_exists(struct hp_ctx *h, const char *id)
{
	struct json_object *r;
	char err[256];
	bool found = false;

	if (qom_list(h, PERIPH, &r, err, sizeof(err)))
		return false;
	for (size_t i = 0; i < json_object_array_length(r); i++) {
		const char *n = jstr(json_object_array_get_idx(r, i), "name");
		if (n && !strcmp(n, id))
			found = true;
	}
	json_object_put(r);
	return found;
}

#define HP_MAX_PCI 1024

static int load_pci(struct hp_ctx *h, struct hp_pcidev **out, int *n, uint32_t *hostbridge_ids,
		    char *err, size_t errlen)
{
	struct json_object *r;

	*out = NULL;
	*n = 0;
	*hostbridge_ids = 0;
	if (hp_qmp(h, "query-pci", NULL, &r, err, errlen))
		return -1;
	*out = calloc(HP_MAX_PCI, sizeof(**out));
	*n = hp_pci_flatten(r, *out, HP_MAX_PCI);
	json_object_put(r);
	if (*n < 0) {
		snprintf(err, errlen, "query-pci: unexpected answer (or more than %d functions)", HP_MAX_PCI);
		return -1;
	}
	for (int i = 0; i < *n; i++)
		if ((*out)[i].bus == 0 && (*out)[i].dev == 0 && (*out)[i].fn == 0)
			*hostbridge_ids = (*out)[i].ids;
	return 0;
}

static void load_nodes(struct hp_ctx *h, struct hp_topo *t)
{
	struct json_object *a = json_object_new_object(), *r;
	char err[256];

	json_object_object_add(a, "flat", json_object_new_boolean(1));
	if (hp_qmp(h, "query-named-block-nodes", a, &r, err, sizeof(err)))
		return;
	for (int i = 0; i < t->nports; i++) {
		struct hp_drive *d = &t->ports[i].drive;
		if (!d->node[0])
			continue;
		for (size_t k = 0; k < json_object_array_length(r); k++) {
			struct json_object *n = json_object_array_get_idx(r, k), *img;
			const char *name = jstr(n, "node-name");
			if (!name || strcmp(name, d->node))
				continue;
			snprintf(d->node_driver, sizeof(d->node_driver), "%s", jstr(n, "drv") ? jstr(n, "drv") : "");
			snprintf(d->file, sizeof(d->file), "%s", jstr(n, "file") ? jstr(n, "file") : "");
			if (json_object_object_get_ex(n, "image", &img))
				d->size = hp_jint(img, "virtual-size", -1);
		}
	}
	json_object_put(r);
}

/* Devices whose parent bus belongs to a root port. */
static void load_occupants(struct hp_ctx *h, struct hp_topo *t, struct json_object *list, const char *base)
{
	char err[256];

	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *e = json_object_array_get_idx(list, i), *r;
		const char *name = jstr(e, "name"), *type = jstr(e, "type");
		char path[256];

		if (!name || !type || strncmp(type, "child<", 6) || is_port_type(type))
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, name);
		if (qom_get(h, path, "parent_bus", &r, err, sizeof(err)))
			continue;
		const char *bus = json_object_get_string(r);
		for (int k = 0; k < t->nports && bus; k++) {
			struct hp_port *p = &t->ports[k];
			size_t pl = strlen(p->path);
			if (strncmp(bus, p->path, pl) || bus[pl] != '/')
				continue;
			if (p->ndrives++ == 0) {
				struct hp_drive *d = &p->drive;
				struct json_object *v;
				snprintf(d->id, sizeof(d->id), "%s", strcmp(base, PERIPH) ? "" : name);
				snprintf(d->path, sizeof(d->path), "%.159s", path);
				snprintf(d->driver, sizeof(d->driver), "%.*s", (int)strlen(type) - 7, type + 6);
				d->size = -1;
				if (!qom_get(h, path, "serial", &v, err, sizeof(err))) {
					snprintf(d->serial, sizeof(d->serial), "%s", json_object_get_string(v));
					json_object_put(v);
				}
				if (!qom_get(h, path, "drive", &v, err, sizeof(err))) {
					snprintf(d->node, sizeof(d->node), "%s", json_object_get_string(v));
					json_object_put(v);
				}
			}
		}
		json_object_put(r);
	}
}

/* ---- config space -------------------------------------------------------- */

static int ecam_read(struct hp_ctx *h, uint64_t addr, uint32_t *w, int n, char *err, size_t errlen)
{
	char *out;
	if (hp_hmp(h, &out, err, errlen, "xp /%dwx 0x%llx", n, (unsigned long long)addr))
		return -1;
	int got = hp_parse_xp_words(out, addr, w, n);
	if (got != n) {
		snprintf(err, errlen, "HMP xp at 0x%llx: unexpected answer '%.80s'", (unsigned long long)addr, out);
		free(out);
		return -1;
	}
	free(out);
	return 0;
}

static void setup_ecam(struct hp_ctx *h, struct hp_topo *t, uint32_t hostbridge_ids)
{
	char *out, err[256];
	uint32_t w;

	t->ecam = false;
	if (getenv("HPSLOT_NO_ECAM")) {
		snprintf(t->ecam_note, sizeof(t->ecam_note), "HPSLOT_NO_ECAM is set");
		return;
	}
	if (hp_hmp(h, &out, err, sizeof(err), "info mtree")) {
		snprintf(t->ecam_note, sizeof(t->ecam_note), "info mtree failed: %.100s", err);
		return;
	}
	int rc = hp_parse_mtree_mmcfg(out, &t->ecam_base, &t->ecam_size);
	free(out);
	if (rc) {
		snprintf(t->ecam_note, sizeof(t->ecam_note), "no enabled pcie-mmcfg-mmio region in info mtree");
		return;
	}
	if (ecam_read(h, t->ecam_base, &w, 1, err, sizeof(err))) {
		snprintf(t->ecam_note, sizeof(t->ecam_note), "%.150s", err);
		return;
	}
	if (!hostbridge_ids || w != hostbridge_ids) {
		snprintf(t->ecam_note, sizeof(t->ecam_note),
			 "ECAM at 0x%llx reads 0x%08x for 00:00.0, query-pci says 0x%08x",
			 (unsigned long long)t->ecam_base, w, hostbridge_ids);
		return;
	}
	t->ecam = true;
}

static void decode_regs(struct hp_port *p, const uint8_t *cfg)
{
	p->exp = hp_find_cap(cfg, PCI_CAP_ID_EXP);
	if (!p->exp)
		return;
	p->lnksta = hp_le16(cfg + p->exp + EXP_LNKSTA);
	p->sltcap = hp_le32(cfg + p->exp + EXP_SLTCAP);
	p->sltctl = hp_le16(cfg + p->exp + EXP_SLTCTL);
	p->sltsta = hp_le16(cfg + p->exp + EXP_SLTSTA);
	p->regs = true;
}

static int port_read_ecam(struct hp_ctx *h, struct hp_topo *t, struct hp_port *p, uint32_t expect_ids,
			  char *err, size_t errlen)
{
	uint32_t w[64];
	uint8_t cfg[256];

	if (ecam_read(h, t->ecam_base + hp_ecam_offset(p->bus, p->dev, p->fn, 0), w, 64, err, errlen))
		return -1;
	for (int i = 0; i < 64; i++) {
		cfg[4 * i] = (uint8_t)w[i];
		cfg[4 * i + 1] = (uint8_t)(w[i] >> 8);
		cfg[4 * i + 2] = (uint8_t)(w[i] >> 16);
		cfg[4 * i + 3] = (uint8_t)(w[i] >> 24);
	}
	if (expect_ids && w[0] != expect_ids) {
		snprintf(err, errlen, "%s: ECAM reads ids 0x%08x, query-pci says 0x%08x", p->id, w[0], expect_ids);
		return -1;
	}
	decode_regs(p, cfg);
	if (!p->regs) {
		snprintf(err, errlen, "%s (%s) has no PCI Express capability", p->id, p->addr);
		return -1;
	}
	return 0;
}

int hp_cf8_save(struct hp_ctx *h, uint32_t *saved, char *err, size_t errlen)
{
	char *out;
	if (hp_hmp(h, &out, err, errlen, "i /w 0x%x", PCI_CONF_ADDR_PORT))
		return -1;
	int rc = hp_parse_ioport_read(out, saved);
	if (rc)
		snprintf(err, errlen, "HMP i 0xcf8: unexpected answer '%.80s'", out);
	free(out);
	return rc;
}

static int hmp_silent(struct hp_ctx *h, char *err, size_t errlen, const char *what, char *out)
{
	for (char *c = out; *c; c++) {
		if (*c != '\r' && *c != '\n' && *c != ' ') {
			snprintf(err, errlen, "HMP %s: unexpected answer '%.80s'", what, out);
			free(out);
			return -1;
		}
	}
	(void)h;
	free(out);
	return 0;
}

int hp_cf8_set(struct hp_ctx *h, uint32_t addr, char *err, size_t errlen)
{
	char *out;
	if (hp_hmp(h, &out, err, errlen, "o /w 0x%x 0x%08x", PCI_CONF_ADDR_PORT, addr))
		return -1;
	return hmp_silent(h, err, errlen, "o 0xcf8", out);
}

int hp_cfg_read32(struct hp_ctx *h, int bus, int dev, int fn, int reg, uint32_t *val, char *err, size_t errlen)
{
	if (hp_cf8_set(h, hp_cf8_address(bus, dev, fn, reg), err, errlen))
		return -1;
	return hp_cfg_read32_here(h, val, err, errlen);
}

/* the dword 0xCF8 already points at */
int hp_cfg_read32_here(struct hp_ctx *h, uint32_t *val, char *err, size_t errlen)
{
	char *out;
	if (hp_hmp(h, &out, err, errlen, "i /w 0x%x", PCI_CONF_DATA_PORT))
		return -1;
	int rc = hp_parse_ioport_read(out, val);
	if (rc)
		snprintf(err, errlen, "HMP i 0xcfc: unexpected answer '%.80s'", out);
	free(out);
	return rc;
}

/* 16-bit write through the data port (0xCF8 already points at the dword). */
int hp_cfg_write16(struct hp_ctx *h, int reg, uint16_t val, char *err, size_t errlen)
{
	char *out;
	if (hp_hmp(h, &out, err, errlen, "o /h 0x%x 0x%04x", hp_cfc_port(reg), val))
		return -1;
	return hmp_silent(h, err, errlen, "o 0xcfc", out);
}

/* Capability walk and slot registers through 0xCF8/0xCFC (VM stopped). */
static int port_read_cf8(struct hp_ctx *h, struct hp_port *p, char *err, size_t errlen)
{
	uint32_t v;
	int pos, ttl = 48;

	if (hp_cfg_read32(h, p->bus, p->dev, p->fn, 0x04, &v, err, errlen))
		return -1;
	if (!((v >> 16) & PCI_STATUS_CAP_LIST))
		goto nocap;
	if (hp_cfg_read32(h, p->bus, p->dev, p->fn, PCI_CAPABILITY_LIST, &v, err, errlen))
		return -1;
	for (pos = v & 0xfc; pos >= 0x40 && ttl-- > 0; pos = (v >> 8) & 0xfc) {
		if (hp_cfg_read32(h, p->bus, p->dev, p->fn, pos, &v, err, errlen))
			return -1;
		if ((v & 0xff) == PCI_CAP_ID_EXP)
			break;
	}
	if (pos < 0x40 || ttl <= 0)
		goto nocap;
	p->exp = pos;
	if (hp_cfg_read32(h, p->bus, p->dev, p->fn, pos + 0x10, &v, err, errlen))
		return -1;
	p->lnksta = (uint16_t)(v >> 16);
	if (hp_cfg_read32(h, p->bus, p->dev, p->fn, pos + EXP_SLTCAP, &p->sltcap, err, errlen))
		return -1;
	if (hp_cfg_read32(h, p->bus, p->dev, p->fn, pos + EXP_SLTCTL, &v, err, errlen))
		return -1;
	p->sltctl = (uint16_t)v;
	p->sltsta = (uint16_t)(v >> 16);
	p->regs = true;
	return 0;
nocap:
	snprintf(err, errlen, "%s (%s) has no PCI Express capability", p->id, p->addr);
	return -1;
}

/* Read all ports' registers with the VM paused (no ECAM). A running VM is
 * stopped and resumed; 0xCF8 is restored either way. */
static int read_regs_cf8_all(struct hp_ctx *h, struct hp_topo *t, char *err, size_t errlen)
{
	bool running;
	uint32_t saved;
	int rc = 0;
	char e2[256];

	if (hp_lock(h, err, errlen))
		return -1;
	hp_domain_state(h, &running);
	if (running) {
		hp_signals_block(true);
		if (hp_vm_stop(h, err, errlen)) {
			char st[64];
			/* did it stop anyway (e.g. a libvirt timeout)? then resume it */
			if (!hp_qemu_running(h, st, sizeof(st)) && !strcmp(st, "paused"))
				hp_vm_cont(h, e2, sizeof(e2));
			hp_signals_block(false);
			hp_unlock();
			return -1;
		}
	}
	if (hp_cf8_save(h, &saved, err, errlen)) {
		rc = -1;
	} else {
		for (int i = 0; i < t->nports && !rc; i++)
			if (port_read_cf8(h, &t->ports[i], err, errlen))
				rc = -1;
		if (hp_cf8_set(h, saved, e2, sizeof(e2)) && !rc) {
			snprintf(err, errlen, "%s", e2);
			rc = -1;
		}
	}
	if (running) {
		if (hp_vm_cont(h, e2, sizeof(e2)) && !rc) {
			snprintf(err, errlen, "%s", e2);
			rc = -1;
		}
		hp_signals_block(false);
	}
	hp_unlock();
	return rc;
}

int hp_port_read_regs(struct hp_ctx *h, struct hp_topo *t, struct hp_port *p, char *err, size_t errlen)
{
	if (t->ecam)
		return port_read_ecam(h, t, p, 0, err, errlen);
	struct hp_topo one = *t;
	one.ports = p;
	one.nports = 1;
	return read_regs_cf8_all(h, &one, err, errlen);
}

static int cmp_port(const void *a, const void *b)
{
	const struct hp_port *x = a, *y = b;
	if (x->bus != y->bus)
		return x->bus - y->bus;
	if (x->dev != y->dev)
		return x->dev - y->dev;
	return x->fn - y->fn;
}

int hp_topo_load(struct hp_ctx *h, struct hp_topo *t, bool regs, char *err, size_t errlen)
{
	struct json_object *list = NULL, *anon = NULL, *v;
	struct hp_pcidev *pci = NULL;
	int npci = 0;
	uint32_t hb_ids;
	size_t used = 0;

	memset(t, 0, sizeof(*t));
	if (qom_list(h, PERIPH, &list, err, errlen))
		return -1;
	size_t n = json_object_array_length(list);
	t->ports = calloc(n ? n : 1, sizeof(*t->ports));
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(list, i);
		const char *name = jstr(e, "name"), *type = jstr(e, "type");
		if (!name || !type || strncmp(type, "child<", 6))
			continue;
		int w = snprintf(t->peripherals + used, sizeof(t->peripherals) - used, " %s", name);
		if (w > 0 && (size_t)w < sizeof(t->peripherals) - used)
			used += (size_t)w;
		if (!is_port_type(type))
			continue;
		struct hp_port *p = &t->ports[t->nports++];
		snprintf(p->id, sizeof(p->id), "%s", name);
		snprintf(p->path, sizeof(p->path), PERIPH "/%s", name);
		p->slot = p->chassis = p->bus = p->dev = p->fn = p->secondary = p->subordinate = -1;
		p->root_slot = -1;
		p->downstream = !strcmp(type, "child<xio3130-downstream>");
	}
	if (load_pci(h, &pci, &npci, &hb_ids, err, errlen))
		goto fail;
	for (int i = 0; i < t->nports; i++) {
		struct hp_port *p = &t->ports[i];
		int k = hp_pci_find(pci, npci, p->id);
		if (k >= 0) {
			p->bus = pci[k].bus;
			p->dev = pci[k].dev;
			p->fn = pci[k].fn;
			p->secondary = pci[k].secondary;
			p->subordinate = pci[k].subordinate;
			int r = hp_pci_root(pci, npci, k);
			if (r >= 0 && r != k)
				snprintf(p->root_port, sizeof(p->root_port), "%s", pci[r].qdev);
		}
		hp_bdf(p->bus, p->dev, p->fn, p->addr, sizeof(p->addr));
		if (!qom_get(h, p->path, "slot", &v, err, errlen)) {
			p->slot = json_object_get_int(v);
			json_object_put(v);
		}
		if (!qom_get(h, p->path, "chassis", &v, err, errlen)) {
			p->chassis = json_object_get_int(v);
			json_object_put(v);
		}
	}
	/* only ports the guest enumerated are usable: config cycles need the
	 * bus number it gave them (a switch's ports have none before the
	 * firmware ran, nor once their JBOF is gone) */
	int k = 0;
	for (int i = 0; i < t->nports; i++)
		if (t->ports[i].dev >= 0)
			t->ports[k++] = t->ports[i];
	t->nports = k;
	qsort(t->ports, (size_t)t->nports, sizeof(*t->ports), cmp_port);
	for (int i = 0; i < t->nports; i++) {
		struct hp_port *p = &t->ports[i];
		for (int j = 0; j < t->nports && p->root_port[0]; j++)
			if (!strcmp(t->ports[j].id, p->root_port))
				p->root_slot = t->ports[j].slot;
	}

	load_occupants(h, t, list, PERIPH);
	if (!qom_list(h, PERIPH_ANON, &anon, err, errlen)) {
		load_occupants(h, t, anon, PERIPH_ANON);
		json_object_put(anon);
	}
	load_nodes(h, t);

	if (regs) {
		setup_ecam(h, t, hb_ids);
		if (t->ecam) {
			for (int i = 0; i < t->nports; i++) {
				int j = hp_pci_find(pci, npci, t->ports[i].id);
				uint32_t ids = j >= 0 ? pci[j].ids : 0;
				if (port_read_ecam(h, t, &t->ports[i], ids, err, errlen))
					goto fail;
			}
		} else if (t->nports && read_regs_cf8_all(h, t, err, errlen)) {
			goto fail;
		}
	}
	free(pci);
	json_object_put(list);
	err[0] = 0;
	return 0;
fail:
	free(pci);
	json_object_put(list);
	hp_topo_free(t);
	return -1;
}

void hp_topo_free(struct hp_topo *t)
{
	free(t->ports);
	t->ports = NULL;
	t->nports = 0;
}

struct hp_port *hp_topo_find(struct hp_topo *t, const struct hp_slotspec *s)
{
	for (int i = 0; i < t->nports; i++) {
		if (s->port[0] ? !strcmp(t->ports[i].id, s->port) : t->ports[i].slot == s->slot)
			return &t->ports[i];
	}
	return NULL;
}

struct json_object *hp_hex16(unsigned v)
{
	char b[16];
	snprintf(b, sizeof(b), "0x%04x", v);
	return json_object_new_string(b);
}

struct json_object *hp_num(double v, int decimals)
{
	char b[64];
	snprintf(b, sizeof(b), "%.*f", decimals, v);
	return json_object_new_double_s(v, b);
}

bool hp_port_holds_switch(const struct hp_port *p)
{
	return p->ndrives && !strcmp(p->drive.driver, "x3130-upstream");
}

struct json_object *hp_port_json(const struct hp_port *p)
{
	struct json_object *o = json_object_new_object();
	char b[32];

	json_object_object_add(o, "slot", json_object_new_int(p->slot));
	json_object_object_add(o, "port", json_object_new_string(p->id));
	json_object_object_add(o, "address", json_object_new_string(p->addr));
	json_object_object_add(o, "chassis", json_object_new_int(p->chassis));
	json_object_object_add(o, "secondary_bus", json_object_new_int(p->secondary));
	json_object_object_add(o, "subordinate_bus", json_object_new_int(p->subordinate));
	json_object_object_add(o, "kind", json_object_new_string(p->downstream ? "switch-downstream-port" :
								 "root-port"));
	if (p->downstream) {
		json_object_object_add(o, "root_port", json_object_new_string(p->root_port));
		json_object_object_add(o, "root_slot", json_object_new_int(p->root_slot));
	}
	json_object_object_add(o, "holds_switch", json_object_new_boolean(hp_port_holds_switch(p)));
	if (p->regs) {
		snprintf(b, sizeof(b), "0x%02x", p->exp);
		json_object_object_add(o, "exp_cap", json_object_new_string(b));
		snprintf(b, sizeof(b), "0x%08x", p->sltcap);
		json_object_object_add(o, "sltcap", json_object_new_string(b));
		json_object_object_add(o, "sltctl", hp_hex16(p->sltctl));
		json_object_object_add(o, "sltsta", hp_hex16(p->sltsta));
		json_object_object_add(o, "lnksta", hp_hex16(p->lnksta));
		json_object_object_add(o, "presence", json_object_new_boolean(p->sltsta & SLTSTA_PDS));
		json_object_object_add(o, "power", json_object_new_string(hp_power_on(p->sltctl) ? "on" : "off"));
		json_object_object_add(o, "power_indicator", json_object_new_string(hp_indicator_name(hp_pic(p->sltctl))));
		json_object_object_add(o, "attention_indicator",
				       json_object_new_string(hp_indicator_name(hp_aic(p->sltctl))));
		json_object_object_add(o, "link_active", json_object_new_boolean(p->lnksta & LNKSTA_DLLLA));
		json_object_object_add(o, "hotplug_interrupt", json_object_new_boolean(p->sltctl & SLTCTL_HPIE));
		char fl[64];
		hp_sltsta_flags(p->sltsta, fl, sizeof(fl));
		json_object_object_add(o, "sltsta_flags", json_object_new_string(fl));
	}
	if (p->ndrives) {
		const struct hp_drive *d = &p->drive;
		struct json_object *j = json_object_new_object();
		json_object_object_add(j, "id", json_object_new_string(d->id));
		json_object_object_add(j, "qom_path", json_object_new_string(d->path));
		json_object_object_add(j, "driver", json_object_new_string(d->driver));
		json_object_object_add(j, "serial", d->serial[0] ? json_object_new_string(d->serial) : NULL);
		json_object_object_add(j, "node", d->node[0] ? json_object_new_string(d->node) : NULL);
		json_object_object_add(j, "node_driver", d->node_driver[0] ? json_object_new_string(d->node_driver) : NULL);
		json_object_object_add(j, "file", d->file[0] ? json_object_new_string(d->file) : NULL);
		json_object_object_add(j, "size", d->size >= 0 ? json_object_new_int64(d->size) : NULL);
		json_object_object_add(o, "drive", j);
		if (p->ndrives > 1)
			json_object_object_add(o, "devices_in_slot", json_object_new_int(p->ndrives));
	} else {
		json_object_object_add(o, "drive", NULL);
	}
	return o;
}

void hp_port_line(const struct hp_port *p, char *buf, size_t len)
{
	char regs[160] = "registers unknown", drive[1024] = "-";

	if (p->regs)
		snprintf(regs, sizeof(regs), "%-7s power=%-3s pwr-ind=%-5s attn=%-5s link=%-4s sltctl=0x%04x sltsta=0x%04x",
			 p->sltsta & SLTSTA_PDS ? "present" : "empty", hp_power_on(p->sltctl) ? "on" : "off",
			 hp_indicator_name(hp_pic(p->sltctl)), hp_indicator_name(hp_aic(p->sltctl)),
			 p->lnksta & LNKSTA_DLLLA ? "up" : "down", p->sltctl, p->sltsta);
	if (p->ndrives) {
		const struct hp_drive *d = &p->drive;
		snprintf(drive, sizeof(drive), "%s (%s) serial=%s node=%s%s%s%s",
			 d->id[0] ? d->id : d->path, d->driver, d->serial[0] ? d->serial : "-",
			 d->node[0] ? d->node : "-", d->file[0] ? " file=" : "", d->file,
			 p->ndrives > 1 ? " +more" : "");
	}
	snprintf(buf, len, "slot %-4d %-7s %s  %s  %s", p->slot, p->id, p->addr, regs, drive);
}
