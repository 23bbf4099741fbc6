/* hpslot: the lab's host-side PCIe hotplug slot actuator.
 *
 * Talks to QEMU through libvirt (virDomainQemuMonitorCommand: QMP, and HMP
 * through human-monitor-command), discovers the root ports and drives at run
 * time and drives the slots: status, orderly/surprise removal, hot-add.
 *
 * regs.c, args.c, pcitree.c and sbrwait.c are pure (no libvirt) and covered by
 * the unit tests.
 */
#ifndef HPSLOT_H
#define HPSLOT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HP_MAX_SLOTS 256
#define HP_MAX_PROPS 8		/* add --prop: at most this many */
#define HP_SERIAL_MAX 20	/* NVMe serial number: at most 20 ASCII characters */

/* Exit codes */
#define HP_EXIT_OK 0
#define HP_EXIT_FAILED 1	/* the action was attempted and did not (fully) work */
#define HP_EXIT_USAGE 2		/* bad command line */
#define HP_EXIT_REFUSED 3	/* bad domain/slot/state: refused, nothing changed */

/* ---- PCI(e) register layout (regs.c) ---------------------------------- */
#define PCI_STATUS 0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_CAPABILITY_LIST 0x34
#define PCI_CAP_ID_EXP 0x10

/* offsets inside the PCI Express capability */
#define EXP_FLAGS 0x02
#define EXP_LNKSTA 0x12
#define EXP_SLTCAP 0x14
#define EXP_SLTCTL 0x18
#define EXP_SLTSTA 0x1a

#define LNKSTA_DLLLA 0x2000

#define SLTCAP_ABP 0x0001	/* attention button present */
#define SLTCAP_PCP 0x0002	/* power controller present */
#define SLTCAP_AIP 0x0008	/* attention indicator present */
#define SLTCAP_PIP 0x0010	/* power indicator present */
#define SLTCAP_HPS 0x0020	/* hot-plug surprise */
#define SLTCAP_HPC 0x0040	/* hot-plug capable */
#define SLTCAP_PSN(x) (((x) >> 19) & 0x1fff)	/* physical slot number */

#define SLTCTL_ABPE 0x0001
#define SLTCTL_PFDE 0x0002
#define SLTCTL_MRLSCE 0x0004
#define SLTCTL_PDCE 0x0008
#define SLTCTL_CCIE 0x0010
#define SLTCTL_HPIE 0x0020
#define SLTCTL_AIC 0x00c0
#define SLTCTL_PIC 0x0300
#define SLTCTL_PCC 0x0400	/* 1 = power off */
#define SLTCTL_IND_ON 1
#define SLTCTL_IND_BLINK 2
#define SLTCTL_IND_OFF 3
#define SLTCTL_YANK 0x0700	/* power controller off + power indicator off */
#define SLTCTL_DLLSCE 0x1000

#define SLTSTA_ABP 0x0001
#define SLTSTA_PFD 0x0002
#define SLTSTA_MRLSC 0x0004
#define SLTSTA_PDC 0x0008
#define SLTSTA_CC 0x0010
#define SLTSTA_MRLSS 0x0020
#define SLTSTA_PDS 0x0040
#define SLTSTA_EIS 0x0080
#define SLTSTA_DLLSC 0x0100

#define PCI_CONF_ADDR_PORT 0xcf8
#define PCI_CONF_DATA_PORT 0xcfc

/* Type-1 config address for port 0xCF8 (register dword-aligned). */
uint32_t hp_cf8_address(int bus, int dev, int fn, int reg);
/* I/O port through which a register of the given width is accessed after
 * hp_cf8_address(): 0xcfc + (reg & 3). */
int hp_cfc_port(int reg);
/* Offset of a function's config space inside the ECAM/MMCONFIG window. */
uint64_t hp_ecam_offset(int bus, int dev, int fn, int reg);
/* Slot Control value that yanks the slot: old | 0x0700. */
uint16_t hp_yank_value(uint16_t old_sltctl);
/* Slot Control with the power indicator field set to SLTCTL_IND_*. */
uint16_t hp_sltctl_with_pic(uint16_t sltctl, int ind);

const char *hp_indicator_name(int field);	/* 0..3: "reserved", "on", "blink", "off" */
int hp_pic(uint16_t sltctl);			/* power indicator field 0..3 */
int hp_aic(uint16_t sltctl);			/* attention indicator field 0..3 */
bool hp_power_on(uint16_t sltctl);		/* PCC == 0 */
/* Readiness of an EMPTY slot for a hot-add: the guest powered it off and
 * turned its power indicator off. NULL when ready, else why not. */
const char *hp_empty_slot_busy(uint16_t sltctl, uint16_t sltsta);
/* Slot Control/Status flags in words, for humans: "ABPE CCIE HPIE" ... */
void hp_sltsta_flags(uint16_t sltsta, char *buf, size_t len);

/* Walk the capability list of a 256-byte config space copy; returns the
 * offset of capability `id` or 0 (also on a loop or an all-ones space). */
int hp_find_cap(const uint8_t *cfg, int id);

static inline uint16_t hp_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t hp_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- HMP text parsing (regs.c) ---------------------------------------- */
/* Parse `xp /Nwx ADDR` output into dwords. Returns the number of dwords
 * read starting at `addr` (lines must start at addr and be contiguous), or
 * -1 on "Cannot access memory" or unparsable text. */
int hp_parse_xp_words(const char *text, uint64_t addr, uint32_t *out, int max);
/* Parse the output of HMP `i /X port`: "portl[0x0cf8] = 0x80000898". */
int hp_parse_ioport_read(const char *text, uint32_t *val);
/* Find the ECAM window in `info mtree` output: the first enabled
 * "pcie-mmcfg-mmio" region. Returns 0 and the base/size, or -1. */
int hp_parse_mtree_mmcfg(const char *text, uint64_t *base, uint64_t *size);
/* An HMP answer that is an error message instead of data (unknown command,
 * bad format...). */
bool hp_hmp_is_error(const char *text);

/* ---- serial numbers and domain XML (regs.c) --------------------------- */
/* Next generation of a serial: "lab1-s3-g0" -> "lab1-s3-g1"; a serial
 * without "-g<N>" gets "-g1". -1 if the result would exceed HP_SERIAL_MAX. */
int hp_serial_bump(const char *serial, char *out, size_t len);
/* The serial recorded for `slot` in hpslot's live domain metadata element
 * (<slot n="11" serial="..."/>), 0 if found. */
int hp_metadata_serial(const char *xml, int slot, char *out, size_t len);
/* Replace or insert the slot's record; writes the whole new element. */
int hp_metadata_set(const char *xml, int slot, const char *serial, char *out, size_t len);
/* Cold-plugged drive of `device_id` in a domain XML's <qemu:arg> list
 * (JSON or key=value -device syntax): its serial, 0 if found. */
int hp_xml_boot_serial(const char *xml, const char *device_id, char *out, size_t len);
/* A serial prefix used by the domain's drives ("lab1" of "lab1-s3-g0"). */
int hp_xml_serial_prefix(const char *xml, char *out, size_t len);
bool hp_valid_serial(const char *s);
/* An AER error as pcie_aer_inject_error takes it: NAME ([A-Z0-9_]) or 0xHEX. */
bool hp_valid_aer_error(const char *s);
/* add --prop KEY=VALUE: NULL if valid, else why not. VALUE true/false is a
 * JSON boolean, a decimal integer a number, anything else a string. */
const char *hp_prop_invalid(const char *kv);
struct json_object *hp_prop_value(const char *value);

/* ---- reads that reached nothing below a slot (regs.c; pure) ---------- */
/* The fidelity QEMU's slot property x-absent-read-pcs (qemu/patches/0009):
 * "0x<pc>:<count>,...[,other:<count>]", "" when empty. */
#define HP_ABSENT_PCS_MAX 64
struct hp_absent_pc {
	char pc[24];		/* "0x..." (guest pc, lowercase hex) or "other" */
	long long count;
};
/* Parse it into out[]; the number of entries, or -1 when it is not that
 * format (or has more than max entries). */
int hp_parse_absent_pcs(const char *s, struct hp_absent_pc *out, int max);

/* ---- waiting for a Secondary Bus Reset (sbrwait.c; pure) ------------- */
/* The fidelity QEMU's slot property x-sbr-count (qemu/patches/0011) counts
 * the Secondary Bus Resets the guest asserted at the port. remove
 * --when-reset polls it (no pause) until it grows. The monitor and the
 * clock come in as callbacks, so the unit tests drive the loop with fakes. */
#define HP_SBR_PROP "x-sbr-count"
#define HP_SBR_POLL_MS 2	/* between two reads of the count */
/* Linux asserts Secondary Bus Reset 2 ms and then leaves the bus alone
 * for 100 ms (pci_bridge_wait_for_secondary_bus): a yank at most this long
 * after the assertion lands inside the guest's reset. */
#define HP_SBR_IN_RESET_MS 102

struct hp_sbr_ops {
	/* read the count: 0, or -1 with a message in err */
	int (*read)(void *arg, unsigned long long *count, char *err, size_t len);
	long long (*now_ns)(void *arg);		/* monotonic */
	void (*sleep_ms)(void *arg, long ms);
	/* called once the count to wait from is read (may be NULL) */
	void (*ready)(void *arg, unsigned long long count);
	void *arg;
};

enum hp_sbr_result { HP_SBR_SEEN, HP_SBR_TIMEOUT, HP_SBR_ERROR };

struct hp_sbr_wait {
	enum hp_sbr_result result;
	unsigned long long count_before;	/* the first read */
	unsigned long long count_last;		/* the last read (the grown count when seen) */
	long polls;				/* reads, the first included */
	long long t0_ns;	/* after the first read: the time limit and the wait count from here */
	long long last_old_ns;	/* before the last read that still had count_before: the
				 * reset was asserted after this */
	long long seen_ns;	/* after the read that saw the count grow */
	bool first_read;	/* the error (if any) came from the first read */
	char err[256];
};

/* Read the count, then poll it every poll_ms until it is larger than the
 * first read (HP_SBR_SEEN), or timeout_ms have passed since the first read
 * (HP_SBR_TIMEOUT), or a read fails or the count goes down (HP_SBR_ERROR,
 * w->err). Returns w->result. */
enum hp_sbr_result hp_sbr_wait(const struct hp_sbr_ops *ops, long timeout_ms, long poll_ms, struct hp_sbr_wait *w);
/* The most the reset's assertion can lie before yank_ns: the time since
 * the last read that still had the old count; and whether that is within
 * HP_SBR_IN_RESET_MS. */
double hp_sbr_to_yank_max_ms(const struct hp_sbr_wait *w, long long yank_ns);
bool hp_sbr_in_reset(const struct hp_sbr_wait *w, long long yank_ns);

/* ---- the guest's PCI tree from query-pci (pcitree.c; pure) ------------ */
/* KEY of O as an integer; DFLT when it is absent or not a number */
long long hp_jint(struct json_object *o, const char *key, long long dflt);
struct hp_pcidev {
	char qdev[64];		/* QEMU device id ("" if anonymous) */
	int bus, dev, fn;	/* where the guest enumerated the function */
	int secondary, subordinate;	/* bridges: the bus range below, else -1 */
	uint32_t ids;		/* vendor | device << 16 */
	int parent;		/* index of the bridge above it, -1 on a root bus */
};

/* Flatten query-pci's "return" (functions nested below the bridges whose
 * secondary bus the guest numbered) depth-first into out[]; the count, or
 * -1 when it is not a query-pci answer or out is too small. */
int hp_pci_flatten(struct json_object *query_pci, struct hp_pcidev *out, int max);
/* Index of the function with QEMU id qdev, -1 if none. */
int hp_pci_find(const struct hp_pcidev *d, int n, const char *qdev);
/* Index of the function on a root bus above entry i (i itself when it is
 * on one), -1 for a bad index. */
int hp_pci_root(const struct hp_pcidev *d, int n, int i);
/* "BB:DD.F" */
void hp_bdf(int bus, int dev, int fn, char *buf, size_t len);

/* ---- command line (args.c) -------------------------------------------- */
enum hp_cmd {
	HP_CMD_NONE, HP_CMD_STATUS, HP_CMD_REMOVE, HP_CMD_ADD, HP_CMD_SWAP, HP_CMD_STORM, HP_CMD_AER,
	HP_CMD_ABSENT
};
#define HP_CMD_FIRST HP_CMD_STATUS
#define HP_CMD_LAST HP_CMD_ABSENT
enum hp_mode { HP_MODE_NONE, HP_MODE_ORDERLY, HP_MODE_SURPRISE };

struct hp_slotspec {
	int slot;		/* physical slot number, or -1 */
	char port[32];		/* "pci.N" when given as a port id, else "" */
	const char *text;
};

struct hp_args {
	enum hp_cmd cmd;
	const char *uri;
	bool json;
	bool help;		/* --help seen: print help for cmd (or general) */
	const char *domain;
	struct hp_slotspec slots[HP_MAX_SLOTS];
	int nslots;
	/* remove */
	enum hp_mode mode;
	bool cancel;
	double timeout;
	double wait_guest;	/* remove --surprise: poll the guest's teardown */
	long quiet_ms;		/* remove --surprise: yank with HPIE off, set it again this much later */
	long stagger_ms;	/* remove --surprise: one pause a slot, this far apart */
	long when_masked_ms;	/* remove --surprise: wait up to this for the guest to mask the slot */
	long after_mask_ms;	/* remove --surprise --when-masked: then wait this long */
	long when_reset_ms;	/* remove --surprise: wait up to this for a Secondary Bus Reset of the port */
	long after_reset_ms;	/* remove --surprise --when-reset: then wait this long */
	/* add */
	const char *serial;
	long size_mib;
	bool size_given;
	const char *node;
	double wait;		/* add, storm: seconds to wait for a slot to become ready */
	bool force;
	const char *props[HP_MAX_PROPS];	/* add --prop KEY=VALUE: extra nvme device properties */
	int nprops;
	/* swap */
	long delay_ms;		/* from the resume after the yank to device_add */
	double settle;		/* swap: watch the new device; storm: final settle timeout */
	bool settle_given;
	/* storm */
	unsigned long long seed;
	bool seed_given;
	int count;
	long max_gap_ms;
	int orderly_percent;
	bool dry_run;
	/* aer */
	const char *aer_error;	/* QEMU's error name (COMP_TIME, SDN...) or 0xSTATUS */
	bool aer_correctable;
	/* absent */
	bool absent_reset;	/* --reset: zero the count after reading it */
};

#define HP_SWAP_SETTLE_DEFAULT 5.0
#define HP_STORM_SETTLE_S 60	/* whole seconds (storm's help text shows them) */
#define HP_STORM_WAIT_S 30
#define HP_STORM_SETTLE_DEFAULT ((double)HP_STORM_SETTLE_S)
#define HP_STORM_WAIT_DEFAULT ((double)HP_STORM_WAIT_S)
#define HP_STORM_MAX_GAP_DEFAULT 1000
#define HP_STORM_ORDERLY_DEFAULT 25
#define HP_STORM_MAX_COUNT 100000

/* Parse the whole command line (argv[0] is the program). Returns 0 when
 * args are complete (or a->help is set), -1 with a message in err. */
int hp_parse_args(int argc, char **argv, struct hp_args *a, char *err, size_t errlen);
int hp_parse_slotspec(const char *s, struct hp_slotspec *out);
const char *hp_cmd_name(enum hp_cmd c);
void hp_usage(FILE *f);
void hp_cmd_help(FILE *f, enum hp_cmd c);

/* ---- storm plan (args.c; pure) --------------------------------------- */
enum hp_storm_kind { HP_STORM_SURPRISE, HP_STORM_ORDERLY, HP_STORM_ADD };

struct hp_storm_action {
	int slot_idx;		/* index into the SLOT arguments */
	enum hp_storm_kind kind;
	long gap_ms;		/* pause after the action */
};

/* splitmix64: the storm's seeded generator (same seed, same numbers on
 * every host). */
uint64_t hp_rng_next(uint64_t *state);
const char *hp_storm_kind_name(enum hp_storm_kind k);
/* The storm's action list, fixed by (seed, count, max_gap_ms,
 * orderly_percent) and the slots' occupancy at the start: each step draws
 * three numbers (slot, kind, gap) whatever it decides, picks a slot
 * uniformly; an occupied slot gets a removal (orderly with probability
 * orderly_percent %, else surprise), an empty one an add; the gap is
 * uniform in 0..max_gap_ms. Fills out[0..count-1]; `occupied` is updated
 * to the expected end state. Returns the number of actions, -1 on bad input. */
int hp_storm_plan(uint64_t seed, int count, long max_gap_ms, int orderly_percent, bool *occupied,
		  int nslots, struct hp_storm_action *out);
/* Device id for a drive swapped into `slot` while `old_id` is leaving:
 * the first of nvme-s<SLOT>, nvme-s<SLOT>-b, nvme-s<SLOT>-c ... that is not
 * old_id and not in `present` (space-separated ids). 0 or -1. */
int hp_swap_device_id(int slot, const char *old_id, const char *present, char *out, size_t len);

/* ---- the per-domain lock file (args.c: pure parts; domainlock.c) ------- */
/* Pauses and 0xCF8/0xCFC sequences on one domain are serialized with an
 * flock on LOCKDIR/DOMAIN.lock. LOCKDIR is $HPSLOT_LOCK_DIR or
 * HP_LOCK_DIR_DEFAULT: a directory of the effective uid, mode 0700 (created
 * with its parent if missing; anything else is refused). The lock file is
 * plain text; the holder writes (vm-watchdog reads the pause line):
 *   pid=<pid> cmd=<command> since=<unix time>      while it holds the lock
 *   paused=1 pid=<pid> since=<unix time>           from before it stops the
 *                                                  domain until a successful cont
 * A pause line found by the next process to take the lock is stale (its
 * writer was killed mid-pause, or could not resume): hp_prepare resumes the
 * domain if it is still paused. */
#define HP_LOCK_DIR_DEFAULT "/run/pciehp-lab/hpslot"
#define HP_LOCK_NAME_MAX 200	/* longest domain name hpslot locks */
#define HP_LOCK_WAIT_DEFAULT 30.0	/* seconds; HPSLOT_LOCK_WAIT */
#define HP_LOCK_WAIT_MAX 3600.0
#define HP_STR_(x) #x
#define HP_STR(x) HP_STR_(x)

struct hp_lock_record {
	long holder_pid;	/* the "pid=" line; 0 none (or not a number) */
	char holder_cmd[32];
	long long holder_since;	/* unix time, 0 unknown */
	bool paused;		/* a "paused=1" line */
	long paused_pid;
	long long paused_since;
	char paused_line[128];	/* that line as written */
};

/* A domain name the lock file can be named after: NULL, else why not
 * ([A-Za-z0-9._+-] only, not starting with '.', at most HP_LOCK_NAME_MAX). */
const char *hp_lock_name_invalid(const char *domain);
/* HPSLOT_LOCK_WAIT: NULL or "" is the default, else seconds in
 * 0..HP_LOCK_WAIT_MAX; -1 with a message otherwise. */
int hp_parse_lock_wait(const char *s, double *out, char *err, size_t len);
/* The lines above, newline-terminated; their length or -1. */
int hp_lock_holder_line(char *buf, size_t len, long pid, const char *cmd, long long since);
int hp_lock_pause_line(char *buf, size_t len, long pid, long long since);
/* Parse a lock file's text (unknown keys and lines are ignored); the
 * number of lines recognized. */
int hp_lock_record_parse(const char *text, struct hp_lock_record *r);

/* ---- monitor access (mon.c) ------------------------------------------- */
struct hp_ctx;

struct hp_event {
	char name[32];
	char device[64];	/* DEVICE_DELETED: data.device (or path) */
	char path[128];
	long long ts_us;	/* QEMU's timestamp (host realtime) */
};

struct hp_ctx *hp_open(const char *uri, const char *domain, char *err, size_t errlen);
void hp_close(struct hp_ctx *h);
const char *hp_domain_name(struct hp_ctx *h);
/* Run QMP `cmd` with `args` (consumed; may be NULL). On success *ret gets
 * the "return" value (caller puts it; may be NULL to discard). On failure
 * err holds QEMU's or libvirt's message. */
int hp_qmp(struct hp_ctx *h, const char *cmd, struct json_object *args,
	   struct json_object **ret, char *err, size_t errlen);
/* QMP qom-get of PROP at PATH (no pause): hp_qom_get's *ret as hp_qmp's;
 * hp_qom_get_int: an integer property, else -1 with err. */
int hp_qom_get(struct hp_ctx *h, const char *path, const char *prop, struct json_object **ret, char *err,
	       size_t len);
int hp_qom_get_int(struct hp_ctx *h, const char *path, const char *prop, long long *v, char *err, size_t len);
/* Run an HMP command line; *out is malloc'd text (caller frees). */
int hp_hmp(struct hp_ctx *h, char **out, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Domain state as libvirt sees it: "running", "paused", "shutoff"... */
const char *hp_domain_state(struct hp_ctx *h, bool *running);
char *hp_domain_xml(struct hp_ctx *h);
char *hp_metadata_get(struct hp_ctx *h);
int hp_metadata_put(struct hp_ctx *h, const char *xml);
/* Events received since the connection was opened (thread-safe copy). */
int hp_events(struct hp_ctx *h, struct hp_event *out, int max);

/* ---- time ------------------------------------------------------------- */
double hp_mono(void);		/* CLOCK_MONOTONIC, seconds */
long long hp_mono_ns(void);
long long hp_real_ns(void);	/* CLOCK_REALTIME, ns */
void hp_sleep(double s);

/* ---- discovery (topo.c) ----------------------------------------------- */
struct hp_drive {
	char id[64];		/* QEMU device id ("" if anonymous) */
	char path[160];		/* QOM path */
	char driver[48];	/* QOM type: nvme, virtio-blk-pci, ... */
	char serial[64];
	char node[128];		/* block node behind the device */
	char file[256];		/* backing file of that node (if any) */
	char node_driver[32];
	long long size;		/* virtual size in bytes, -1 unknown */
};

struct hp_port {
	char id[64];		/* pci.N */
	char path[160];		/* /machine/peripheral/pci.N */
	int bus, dev, fn;	/* where the guest enumerated it: bus 0 for a root
				 * port, the switch's internal bus for a
				 * downstream port */
	char addr[16];		/* "BB:DD.F" */
	bool downstream;	/* a switch's downstream port (a JBOF slot) */
	char root_port[64];	/* downstream port: id of the root port above */
	int root_slot;		/* ... and its slot number; -1 for a root port */
	int slot, chassis;
	int secondary, subordinate;	/* bus range the guest programmed below it */
	int exp;		/* PCIe capability offset, 0 unknown */
	bool regs;		/* the registers below were read */
	uint16_t lnksta, sltctl, sltsta;
	uint32_t sltcap;
	int ndrives;		/* devices on the port's secondary bus */
	struct hp_drive drive;	/* the first of them (a switch's upstream port
				 * in a root port that holds a JBOF) */
};

/* Does the port hold a switch (a JBOF) rather than an endpoint? */
bool hp_port_holds_switch(const struct hp_port *p);

struct hp_topo {
	struct hp_port *ports;
	int nports;
	uint64_t ecam_base, ecam_size;
	bool ecam;		/* ECAM reads work (verified against query-pci) */
	char ecam_note[160];
	char peripherals[4096];	/* space-separated ids in /machine/peripheral */
};

/* Find root ports and what sits in them; read slot registers when `regs`. */
int hp_topo_load(struct hp_ctx *h, struct hp_topo *t, bool regs, char *err, size_t errlen);
void hp_topo_free(struct hp_topo *t);
/* Re-read the slot registers of one port: ECAM, or 0xCF8 in a pause. */
int hp_port_read_regs(struct hp_ctx *h, struct hp_topo *t, struct hp_port *p, char *err, size_t errlen);
struct hp_port *hp_topo_find(struct hp_topo *t, const struct hp_slotspec *s);
bool hp_peripheral_exists(struct hp_ctx *h, const char *id);
/* Port description for output. */
struct json_object *hp_port_json(const struct hp_port *p);
void hp_port_line(const struct hp_port *p, char *buf, size_t len);

/* Config cycles through 0xCF8/0xCFC; only while the VM is stopped. */
int hp_cf8_save(struct hp_ctx *h, uint32_t *saved, char *err, size_t errlen);
int hp_cf8_set(struct hp_ctx *h, uint32_t addr, char *err, size_t errlen);
int hp_cfg_read32(struct hp_ctx *h, int bus, int dev, int fn, int reg, uint32_t *val, char *err, size_t errlen);
int hp_cfg_read32_here(struct hp_ctx *h, uint32_t *val, char *err, size_t errlen);
int hp_cfg_write16(struct hp_ctx *h, int reg, uint16_t val, char *err, size_t errlen);

/* ---- shared command helpers: output (out.c), preparation and serials
 * (common.c), the lock and the domain's run state (domainlock.c). Layers,
 * each calling only those below it: mon.c (monitor transport), out.c,
 * args.c; domainlock.c; regs.c, pcitree.c, topo.c (config space,
 * topology); common.c, slotops.c, pause.c; the commands. ---- */
struct hp_out {
	struct hp_args *a;
	struct json_object *root;	/* the one JSON object */
	struct json_object *slots;	/* per-slot results */
	/* remove --surprise calls this right after resuming the domain
	 * (monotonic ns of the resume), before it looks at the result: swap
	 * does its device_add from here */
	void (*after_resume)(struct hp_out *o, struct hp_ctx *h, long long resumed_mono_ns, void *arg);
	void *after_resume_arg;
};

/* Open, check the domain runs, load topology, resolve the slot arguments.
 * Returns 0 or an exit code (message in out). */
int hp_prepare(struct hp_args *a, struct hp_out *o, struct hp_ctx **h, struct hp_topo *t,
	       struct hp_port **ports, bool need_running, bool regs);
void hp_fail(struct hp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hp_note(struct hp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hp_say(struct hp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct json_object *hp_hex16(unsigned v);
struct json_object *hp_num(double v, int decimals);	/* a JSON number with fixed decimals */
/* Serial bookkeeping in the domain's live metadata. */
void hp_remember_serial(struct hp_ctx *h, int slot, const char *serial);
int hp_default_serial(struct hp_ctx *h, int slot, char *out, size_t len, char *err, size_t errlen);
/* Terminating signals are held back inside hp_signals_block(true) ... (false)
 * (nestable), i.e. while the VM is stopped; hp_signals_install() at start. */
void hp_signals_install(void);
/* Per-domain lock around pauses and 0xCF8/0xCFC sequences (nestable; see
 * "the per-domain lock file" above). Waits up to HPSLOT_LOCK_WAIT (30 s);
 * -1 with a message (naming the holder when it is busy) if the lock
 * cannot be had: then nothing may be done to the domain. */
int hp_lock(struct hp_ctx *h, char *err, size_t len);
void hp_unlock(void);
const char *hp_lock_dir(void);		/* $HPSLOT_LOCK_DIR or HP_LOCK_DIR_DEFAULT */
void hp_lock_set_cmd(const char *cmd);	/* the cmd= the holder line names */
void hp_signals_block(bool block);
/* Stop / resume through QMP. hp_vm_stop needs the lock: it writes the
 * pause line first (and refuses to stop if it cannot); hp_vm_cont clears
 * it after the domain runs again. */
int hp_vm_stop(struct hp_ctx *h, char *err, size_t errlen);
bool hp_qemu_running(struct hp_ctx *h, char *status, size_t len);	/* query-status */
int hp_vm_cont(struct hp_ctx *h, char *err, size_t errlen);
/* Just after hp_lock: resume a pause an earlier hpslot left recorded in
 * the lock file (domainlock.c); 0, or an exit code if it stays paused. */
int hp_lock_recover(struct hp_ctx *h, struct hp_out *o);

int cmd_status(struct hp_args *a, struct hp_out *o);
int cmd_remove(struct hp_args *a, struct hp_out *o);
int cmd_add(struct hp_args *a, struct hp_out *o);
int cmd_swap(struct hp_args *a, struct hp_out *o);
int cmd_storm(struct hp_args *a, struct hp_out *o);
int cmd_aer(struct hp_args *a, struct hp_out *o);
int cmd_absent(struct hp_args *a, struct hp_out *o);

/* The commands' work on an open domain and loaded topology (ports[i] is
 * the port of a->slots[i]); used by swap and storm with sub-arguments.
 * hp_add_ports may reload *t (while it waits) and updates ports[]. */
int hp_remove_ports(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *t,
		    struct hp_port **ports);
int hp_add_ports(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *t,
		 struct hp_port **ports);
/* A fresh hp_out for a sub-command (JSON only, nothing printed); free with
 * hp_out_free. */
void hp_out_init(struct hp_out *o, struct hp_args *a);
void hp_out_free(struct hp_out *o);
/* Reload the topology and re-resolve ports[i] for a->slots[i]. */
int hp_topo_reload(struct hp_ctx *h, struct hp_topo *t, struct hp_args *a, struct hp_port **ports,
		   char *err, size_t errlen);
/* 1 the port has the lab QEMU's x-surprise-removal, 0 not, -1 unknown */
int hp_port_qemu_surprise(struct hp_ctx *h, const struct hp_port *p);
/* Is the device (QOM path) still there? 1 yes, 0 no, -1 unknown. */
int hp_device_present(struct hp_ctx *h, const char *path);
int hp_device_del(struct hp_ctx *h, const char *id, char *err, size_t len);
/* QEMU's timestamp (realtime ns) of the first event `name` for `device`
 * (id or QOM path; NULL any) at or after after_real_ns; -1 none. With
 * nth > 0 the nth such event. */
long long hp_event_ts(struct hp_ctx *h, const char *name, const char *device, long long after_real_ns, int nth);

/* ---- remove: pause.c, surprise.c, orderly.c, slotops.c ----------------- */
/* One pause: stop, save 0xCF8 ... restore 0xCF8, cont (pause.c). */
struct pause {
	bool stopped, cf8_saved, not_running;
	bool asleep;	/* guest in S3: vCPUs stopped already, no stop/cont */
	uint32_t cf8;
	long long stop_sent, stop_done, cont_sent, cont_done;	/* monotonic ns */
	long long stop_real;
};

/* Lock, stop the domain (a guest in S3 stays asleep), save 0xCF8; -1 with err (pause_end it if ps->stopped). */
int pause_begin(struct hp_ctx *h, struct pause *ps, char *err, size_t len);
/* Restore 0xCF8 and resume (if stopped), always; -1 if either failed. */
int pause_end(struct hp_ctx *h, struct pause *ps, char *err, size_t len);
/* remove --surprise (surprise.c): yank a->nslots slots; an exit code. */
int surprise(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *t,
	     struct hp_port **ports);
/* remove --orderly [--cancel] (orderly.c): press and wait (or have the guest cancel); an exit code. */
int orderly(struct hp_args *a, struct hp_out *o, struct hp_ctx *h, struct hp_topo *t,
	    struct hp_port **ports);
/* Shared by both modes (slotops.c). */
/* Read the port's Slot Control and Status through 0xCF8/0xCFC (domain paused). */
int slot_read(struct hp_ctx *h, struct hp_port *p, uint16_t *ctl, uint16_t *sta, char *err, size_t len);
/* Write Slot Control right after slot_read (0xCF8 still addresses it). */
int slot_write_here(struct hp_ctx *h, struct hp_port *p, uint16_t val, char *err, size_t len);
/* Write Slot Control, setting 0xCF8 first. */
int slot_write(struct hp_ctx *h, struct hp_port *p, uint16_t val, char *err, size_t len);
/* The port's drive as device_del takes it: its id, else its QOM path. */
const char *dev_ref(const struct hp_port *p);
/* device_del of a device id or QOM path (hp_device_del). */
int device_del(struct hp_ctx *h, const char *id, char *err, size_t len);
/* Is the port's drive (by its QOM path) still there? 1 yes, 0 no, -1 unknown. */
int device_present(struct hp_ctx *h, const struct hp_port *p);
/* hp_event_ts of the first such event. */
long long event_ts_ns(struct hp_ctx *h, const char *name, const char *device, long long after_real_ns);
/* A slot's JSON record: slot, port, address, device, serial, node. */
struct json_object *slot_base(const struct hp_port *p);
/* Add a string member. */
void set_str(struct json_object *o, const char *k, const char *v);

#endif
