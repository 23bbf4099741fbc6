/* Command line parsing and help texts (pure; unit-tested).
 *
 * A table names the commands, each with its options (struct option) and
 * texts. hp_parse_args() runs one getopt_long loop over every option hpslot
 * has, checks each value as it comes, and then refuses an option that is
 * not in the command's list, naming the command(s) it belongs to. */
#include "hpslot.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_URI "qemu:///system"
#define DEFAULT_TIMEOUT 20.0
#define DEFAULT_SIZE_MIB 64

/* `hpslot --help`: the lines before and after the commands' summaries */
static const char usage_head[] =
"usage: hpslot [-c URI] [--json] COMMAND [OPTIONS] DOMAIN [SLOT...]\n"
"\n"
"pciehp-lab's host-side PCIe hotplug slot actuator. It drives the pcie-root-port\n"
"slots of a running libvirt/QEMU domain (q35, native PCIe hotplug) through the\n"
"QEMU monitor and discovers ports, drives and block nodes from QEMU at run time.\n"
"\n"
"commands:\n";
static const char usage_tail[] =
"  help [COMMAND]                                 this text, or a command's\n"
"\n"
"SLOT is a physical slot number (the root port's `slot` property, what the guest\n"
"shows as /sys/bus/pci/slots/<SLOT>) or a root port id such as pci.3.\n"
"\n"
"options (anywhere on the line):\n"
"  -c, --connect URI   libvirt URI (default " DEFAULT_URI ")\n"
"  --json              print one JSON object on stdout instead of text\n"
"  -h, --help          help; `hpslot COMMAND --help` documents a command\n"
"\n"
"Pauses and 0xCF8/0xCFC sequences on one domain are serialized between\n"
"hpslot processes: flock on LOCKDIR/DOMAIN.lock, LOCKDIR $HPSLOT_LOCK_DIR or\n"
HP_LOCK_DIR_DEFAULT " (created mode 0700 if missing; refused unless it\n"
"is a directory of the user with no group/other access), waiting up to\n"
"$HPSLOT_LOCK_WAIT s (30). No lock, no action: hpslot fails (exit 1) naming the\n"
"holder. DOMAIN must be of [A-Za-z0-9._+-] and not start with '.'. The holder\n"
"writes \"pid=N cmd=C since=T\" into the file and, before it pauses the domain,\n"
"\"paused=1 pid=N since=T\" (cleared after the resume). The next hpslot to take\n"
"the lock resumes a domain left paused that way (a killed hpslot) and says so\n"
"(stderr, and \"stale_pause\" in --json); vm-watchdog resumes one that stays\n"
"paused with nobody holding the lock.\n"
"\n"
"HPSLOT_DEBUG=1 in the environment logs every monitor command and answer\n"
"(with times) to stderr.\n"
"\n"
"exit status: 0 the action was carried out; 1 it was attempted and failed (or\n"
"only partly worked; see the per-slot results; or the domain's lock could not be\n"
"had: nothing was changed); 2 bad command line; 3 refused\n"
"(unknown domain or slot, no drive, domain not running, slot busy...): nothing\n"
"was changed.\n";

static const char status_summary[] =
"  status DOMAIN [SLOT...]                        one line a slot: registers and drive\n";
static const char status_help[] =
"usage: hpslot status [-c URI] [--json] DOMAIN [SLOT...]\n"
"\n"
"One line a root port (all, or the named SLOTs): physical slot, root port id,\n"
"its pcie.0 address, then from the port's PCI Express capability (found by\n"
"walking the capability list):\n"
"  presence   Slot Status Presence Detect State (PDS)\n"
"  power      Slot Control Power Controller Control (on/off)\n"
"  pwr-ind    Slot Control power indicator (on/blink/off)\n"
"  attn       Slot Control attention indicator (on/blink/off)\n"
"  link       Link Status Data Link Layer Link Active\n"
"and the device QEMU has in the slot: id, serial, block node (+ file).\n"
"\n"
"Config space is read without pausing the guest, through the ECAM/MMCONFIG\n"
"window with HMP `xp` (base taken from `info mtree`, region pcie-mmcfg-mmio,\n"
"and verified against query-pci's vendor/device ids). Only if that window is\n"
"missing or does not verify (e.g. firmware has not enabled it yet), the domain\n"
"is paused for the read: 0xCF8 saved, config cycles through 0xCF8/0xCFC, 0xCF8\n"
"restored, resumed; the output then says config_read=cf8-paused. (Setting\n"
"HPSLOT_NO_ECAM=1 in the environment forces that path, for testing.)\n"
"\n"
"--json: {\"command\":\"status\",\"ok\":true,\"domain\":..,\"state\":\"running\",\n"
"  \"config_read\":\"ecam\"|\"cf8-paused\"|\"none\",\"ecam_base\":\"0xb0000000\",\n"
"  \"slots\":[{\"slot\":3,\"port\":\"pci.3\",\"address\":\"00:04.0\",\"chassis\":1,\n"
"    \"secondary_bus\":3,\"exp_cap\":\"0x54\",\"sltcap\":\"0x..\",\"sltctl\":\"0x01f1\",\n"
"    \"sltsta\":\"0x0040\",\"lnksta\":\"0x..\",\"presence\":true,\"power\":\"on\",\n"
"    \"power_indicator\":\"on\",\"attention_indicator\":\"off\",\"link_active\":true,\n"
"    \"drive\":{\"id\":\"nvme-s3\",\"driver\":\"nvme\",\"serial\":\"lab1-s3-g0\",\n"
"      \"node\":\"drive-s3\",\"node_driver\":\"raw\",\"file\":\"...\",\"size\":67108864}|null}]}\n"
"Works on a paused domain too (ECAM only; it is not resumed by status, except\n"
"a domain a killed hpslot left paused: see the lock in `hpslot --help`).\n";

static const char remove_summary[] =
"  remove --orderly [--cancel] [--timeout S] DOMAIN SLOT...\n"
"                                                 attention-button removal (device_del)\n"
"  remove --surprise [--wait-guest S] [--quiet-ms MS] [--stagger-ms MS]\n"
"         [--when-masked MS [--after-mask-ms D] | --when-reset MS [--after-reset-ms D]]\n"
"         DOMAIN SLOT...                          surprise removal of all SLOTs in one pause\n";
static const char remove_help[] =
"usage: hpslot remove --orderly [--cancel] [--timeout S] [-c URI] [--json] DOMAIN SLOT...\n"
"       hpslot remove --surprise [--wait-guest S] [--quiet-ms MS] [--stagger-ms MS]\n"
"                    [--when-masked MS [--after-mask-ms D] | --when-reset MS [--after-reset-ms D]]\n"
"                    [-c URI] [--json] DOMAIN SLOT...\n"
"\n"
"Every SLOT must hold a drive and the domain must be running; otherwise nothing\n"
"is done (exit 3). Removed drives' block nodes are kept, so `hpslot add` puts\n"
"the same drive (same data) back.\n"
"\n"
"--orderly: device_del of the drive in each SLOT (QEMU presses the slot's\n"
"  attention button; Linux blinks 5 s, unbinds, powers the slot off, and that\n"
"  Slot Control write makes QEMU unplug). Waits until each device is gone\n"
"  (DEVICE_DELETED, and the device gone from QOM), at most --timeout S seconds\n"
"  (default 20). Per slot: seconds from device_del to DEVICE_DELETED.\n"
"--cancel (with --orderly): press the button a second time inside the guest's\n"
"  5 s window, so the guest cancels and the drive stays; verified after the\n"
"  window (device still there, slot powered, indicator on). QEMU 7.2 refuses a\n"
"  plain second device_del both within 5 s of the first (\"already in the\n"
"  process of unplug\") and while the guest blinks (\"guest is busy\"), so hpslot\n"
"  does this: pause, clear Attention Button Pressed Enable in the port's Slot\n"
"  Control, resume; device_del (QEMU latches the press, no interrupt yet);\n"
"  after 2 s pause, set the enable again (the guest now sees the press and\n"
"  starts its 5 s), resume; once QEMU's 5 s have passed: pause, set the power\n"
"  indicator from blink to on, device_del again (second press), resume. The\n"
"  guest logs \"Button cancel\" / \"Action canceled due to button press\". Takes\n"
"  about 10.5 s: it returns once QEMU accepts a device_del of the drive again\n"
"  (5 s after the second press).\n"
"--surprise: host-initiated surprise removal of ALL named slots in ONE pause:\n"
"  stop; save 0xCF8 (HMP `i /w 0xcf8`; in HMP /w is 32 bits, /h 16); then for\n"
"  each slot: 0xCF8 = 0x80000000|bus<<16|dev<<11|fn<<8|(reg&0xfc) for the\n"
"  port's Slot Control (bus: where the guest enumerated the port -- 0 for a\n"
"  root port, the switch's internal bus for a JBOF's downstream port, from\n"
"  query-pci; offset from the capability walk), read Slot Control/Status\n"
"  (`i /w 0xcfc`), write Slot Control = old|0x0700 (`o /h 0xcfc+(reg&3)`:\n"
"  power off + power indicator off, so QEMU unplugs the endpoint at once,\n"
"  clears PDS and sets PDC), write the old value back (so the guest's pciehp\n"
"  still sees the slot powered and tears it down), read back; restore 0xCF8;\n"
"  cont. The domain is resumed on every path, errors and signals included\n"
"  (it is stopped only if QEMU reported it running just before). Afterwards\n"
"  a device QEMU kept is deleted (device_del) and reported as leftover.\n"
"  Reports how long the domain was paused (host CLOCK_MONOTONIC; and from\n"
"  QEMU's STOP/RESUME event timestamps) and each slot's yank time\n"
"  (CLOCK_REALTIME ns, taken just before its power-off write; the guest runs\n"
"  again at resumed_ns). The guest's clock stands still while it is paused\n"
"  (TCG), so for the guest all slots go at the same instant, however long the\n"
"  pause took.\n"
"  A domain asleep in S3 (libvirt pm-suspended, QEMU status suspended) is\n"
"  not stopped and resumed: QEMU keeps its vCPUs stopped until the wake-up\n"
"  (which resets the machine; the guest's PCI core restores the ports), so\n"
"  the drive is gone when the guest wakes up (\"guest_asleep\":true).\n"
"--quiet-ms MS (with --surprise): a removal that raises no interrupt, as a\n"
"  real one does while the guest has Presence Detect Changed masked (e.g.\n"
"  during its Secondary Bus Reset of the slot): both Slot Control writes of\n"
"  the recipe also clear Hot-Plug Interrupt Enable, so the Command Completed\n"
"  of the writes (QEMU sets it for any Slot Control write) interrupts nobody\n"
"  and Presence Detect Changed just latches. MS ms after the resume hpslot\n"
"  pauses again and sets Hot-Plug Interrupt Enable back (\"hpie_restored\").\n"
"  Meanwhile the guest's own Slot Control writes keep it clear (they\n"
"  read-modify-write) and get no Command Completed interrupt: 6.1 pciehp\n"
"  then waits 1 s per command and logs \"Timeout on hotplug command\".\n"
"  A SLOT whose root port holds a switch (a JBOF: x3130-upstream) yanks the\n"
"  whole JBOF: QEMU deletes the switch, its downstream ports and every drive\n"
"  below at once; hpslot checks that all of them are gone (\"below\").\n"
"--when-masked MS (with --surprise, one SLOT): the yank waits, for up to MS\n"
"  ms, until the guest masks the slot's change notifications: it has turned\n"
"  off Presence Detect Changed Enable and Data Link Layer State Changed\n"
"  Enable (those that were on) and left Hot-Plug Interrupt Enable on, as\n"
"  Linux's pciehp_reset_slot() does around a Secondary Bus Reset of the\n"
"  slot, and its IRQ handler has cleared the Command Completed of that\n"
"  masking write (yanked earlier, the handler would read the removal's\n"
"  events with it). Slot Control is polled through ECAM without pausing (a\n"
"  poll is one monitor round trip), or through 0xCF8 in short pauses where\n"
"  ECAM is off. The yank follows --after-mask-ms D (default 20) ms later,\n"
"  inside the bus reset (at least 100 ms in Linux); in the pause\n"
"  hpslot reads Slot Control again and reports whether the mask still held\n"
"  (\"when_masked\".\"masked_at_yank\"). No mask in MS ms: nothing is\n"
"  yanked, exit 1. Once the polling starts hpslot says so on stderr\n"
"  (\"hpslot: slot N: Slot Control ...; waiting up to MS ms\"). Linux since 2af781a9edc4 (the lab's kernel 0006) no\n"
"  longer masks around the reset: use --when-reset there.\n"
"--when-reset MS (with --surprise, one SLOT; the lab's QEMU only,\n"
"  lab_platform=fidelity, qemu/patches/0011): the yank waits, for up to MS\n"
"  ms, until the guest asserts a Secondary Bus Reset at the slot's port\n"
"  (Bridge Control bit 6, e.g. pciehp_reset_slot() for AER recovery), as\n"
"  counted by the port's x-sbr-count: read with qom-get without pausing,\n"
"  every 2 ms, until it grows. Once hpslot has the count it waits from, it\n"
"  says so on stderr (\"hpslot: slot N: x-sbr-count C ...; waiting up to MS\n"
"  ms\"), so a caller can start the reset after that line. The yank\n"
"  follows --after-reset-ms D (default 20) ms later, inside the reset:\n"
"  Linux asserts it for 2 ms and leaves the bus alone 100 ms after it.\n"
"  In the pause hpslot reads the count again (\"count_at_yank\") and\n"
"  reports at most how long after the reset's assertion the yank came\n"
"  (\"reset_to_yank_max_ms\": from the last poll that still had the old\n"
"  count) and \"in_reset\": true when that is at most 102 ms. No reset in\n"
"  MS ms: nothing is yanked, exit 1. A QEMU without x-sbr-count (Debian's):\n"
"  refused before anything is yanked, exit 3.\n"
"--stagger-ms MS (with --surprise): one pause a slot, in the order given,\n"
"  with MS ms of guest run time between them instead of one pause for all,\n"
"  e.g. a drive in a JBOF and then, MS ms later, the JBOF's root port -- so\n"
"  the guest is tearing the first slot down when the second goes.\n"
"--wait-guest S (with --surprise): after resuming, poll the slots' registers\n"
"  (ECAM, no pause) for up to S seconds and report when the guest powered each\n"
"  slot off (its pciehp finished unbinding the driver) and turned the power\n"
"  indicator off (teardown complete; a re-add is safe from then on). One slot\n"
"  is read at a time, in the order given, every 20 ms (a read is a monitor\n"
"  round trip on the host CPUs the guest tears down on); a slot behind the\n"
"  one read is timed when its turn comes, so its times are upper bounds. A\n"
"  scenario's next guest command after this returns does not share the\n"
"  guest's vCPUs with the teardown. Not reaching that state in S seconds is\n"
"  reported (guest_done false) but does not change the exit status.\n"
"\n"
"Re-adding into a slot right after a surprise removal races the guest's\n"
"teardown: `hpslot add` refuses until the guest has powered the slot off and\n"
"turned its indicator off (use add --wait S).\n"
"\n"
"--json: {\"command\":\"remove\",\"mode\":\"orderly\"|\"surprise\",\"ok\":..,\"domain\":..,\n"
"  surprise: \"paused_ms\":..,\"paused_qemu_ms\":..,\"stop_ns\":..,\"resumed_ns\":..,\n"
"  orderly: \"timeout_s\":20,\"cancel\":false,\n"
"  --when-masked: \"when_masked\":{\"timeout_ms\":..,\"after_mask_ms\":20,\"masked\":true,\n"
"    \"polls\":..,\"waited_ms\":..,\"sltctl_before\":..,\"sltctl_masked\":..,\"masked_at_yank\":..},\n"
"  --when-reset: \"when_reset\":{\"timeout_ms\":..,\"after_reset_ms\":20,\"property\":\"x-sbr-count\",\n"
"    \"count_before\":3,\"count_at_reset\":4,\"reset\":true,\"polls\":..,\"waited_ms\":..,\n"
"    \"count_at_yank\":4,\"reset_to_yank_max_ms\":23.4,\"in_reset\":true},\n"
"  \"slots\":[{\"slot\":3,\"port\":\"pci.3\",\"address\":\"00:04.0\",\"device\":\"nvme-s3\",\n"
"    \"serial\":..,\"node\":..,\"result\":\"removed\"|\"kept\"|\"timeout\"|\"failed\",\n"
"    orderly: \"deleted_after_s\":6.3, cancel: \"cancelled\":true,\n"
"    surprise: \"yank_ns\":..,\"sltctl_before\":..,\"sltsta_before\":..,\n"
"      \"sltctl_after\":..,\"sltsta_after\":..,\"unplugged\":true,\"leftover\":\"none\",\n"
"      \"device_deleted_ns\":.. (QEMU's DEVICE_DELETED, sent when the device object\n"
"      is finalized: can lag the unplug by tens of ms),\n"
"      with --wait-guest: \"guest_power_off_s\":0.05,\"guest_done_s\":1.08 (seconds\n"
"      after resume; null if not seen), \"guest_done\":true,\n"
"    \"error\":\"...\" when it failed}]}\n";

static const char add_summary[] =
"  add [--serial S] [--size MIB] [--node NAME] [--wait S] [--force] DOMAIN SLOT...\n"
"                                                 hot-add an NVMe drive into each SLOT\n";
static const char add_help[] =
"usage: hpslot add [--serial S] [--size MIB] [--node NAME] [--prop KEY=VALUE]...\n"
"                  [--wait S] [--force] [-c URI] [--json] DOMAIN SLOT...\n"
"\n"
"device_add an NVMe drive (id nvme-s<SLOT>, bus = the slot's root port) into\n"
"each SLOT. Block node: NAME (default drive-s<SLOT>); if that node exists and\n"
"no device uses it, it is reused (the same drive comes back with its data);\n"
"otherwise a new null-co node (read-zeroes=on) of --size MIB (default 64) is\n"
"created with blockdev-add (and deleted again if device_add fails).\n"
"Serial: S, or the slot's last serial with its generation bumped\n"
"(lab1-s3-g0 -> lab1-s3-g1; the last serial is kept in the domain's live\n"
"libvirt metadata, else taken from the domain XML's cold-plugged drive); at\n"
"most 20 characters. --serial and --node need exactly one SLOT.\n"
"--prop KEY=VALUE (up to 8): an extra property of the nvme device, e.g.\n"
"use-intel-id=true (Vendor/Device ID 8086:5845 instead of 1b36:0010: a\n"
"different device to the guest). VALUE true/false is a boolean, a decimal\n"
"integer a number, anything else a string; id, drive, serial, bus and driver\n"
"are hpslot's own.\n"
"\n"
"A domain asleep in S3 (libvirt pm-suspended) takes a hot-add too: the\n"
"device is there when the guest wakes up (the port's Slot Status events of\n"
"the add are lost in the wake-up reset; use --force, the guest cannot tear\n"
"the slot down while it sleeps).\n"
"\n"
"Refused (exit 3, nothing changed): a SLOT that holds a drive the guest uses\n"
"(powered, indicator not blinking), a node in use, or a slot in teardown: its\n"
"drive still present while the guest blinks or has powered the slot off (an\n"
"orderly removal under way), a device id nvme-s<SLOT> still present anywhere,\n"
"or an empty slot the guest has not finished tearing down (still powered on,\n"
"or power indicator blinking/on). --wait S polls up to S seconds for a slot in\n"
"teardown to become ready (re-reading the topology); --force skips the\n"
"slot-register checks (a guest without pciehp never powers an emptied slot off).\n"
"\n"
"--json: {\"command\":\"add\",\"ok\":..,\"domain\":..,\"slots\":[{\"slot\":3,\"port\":\"pci.3\",\n"
"  \"address\":\"00:04.0\",\"device\":\"nvme-s3\",\"serial\":\"lab1-s3-g1\",\"node\":\"drive-s3\",\n"
"  \"node_reused\":true,\"size\":67108864,\"added_ns\":..,\"waited_s\":0.0,\n"
"  \"presence\":true,\"result\":\"added\"|\"failed\",\"error\":..}]}\n";

static const char swap_summary[] =
"  swap [--delay-ms D] [--serial S] [--settle S] DOMAIN SLOT\n"
"                                                 surprise removal, D ms later a new drive\n";
static const char swap_help[] =
"usage: hpslot swap [--delay-ms D] [--serial S] [--settle S] [-c URI] [--json] DOMAIN SLOT\n"
"\n"
"A drive swapped for another one in a hurry: surprise removal of the drive in\n"
"SLOT (the one-pause recipe of `remove --surprise`), then, D ms (default 0)\n"
"after the domain resumed (host CLOCK_MONOTONIC), device_add of a NEW drive\n"
"into the slot WITHOUT waiting for the guest's teardown -- the race between\n"
"the guest tearing the old drive down and the new one arriving is what this\n"
"measures. Then it watches the slot for --settle S seconds (default 5): QEMU\n"
"unplugs whatever sits in a slot when the guest powers the slot off, so if the\n"
"guest's teardown of the old drive ends after the add, the NEW drive is deleted\n"
"(DEVICE_DELETED for its id, or gone from QOM): reported as deleted.\n"
"\n"
"The new drive: serial S (default: the slot's serial with the next generation,\n"
"lab1-s3-g0 -> lab1-s3-g1); device id the first of nvme-s<SLOT>, nvme-s<SLOT>-b,\n"
"nvme-s<SLOT>-c... that differs from the old drive's (so the old drive's and\n"
"the new drive's DEVICE_DELETED events cannot be confused); block node a new\n"
"null-co node (read-zeroes) swap-s<SLOT>-<N> of the old drive's size, created\n"
"before the yank (the old drive's node is held until QEMU finalizes the old\n"
"device, tens of ms after the unplug; a fresh node keeps that out of the\n"
"measurement). Unused swap-s<SLOT>-* nodes of earlier swaps are deleted.\n"
"\n"
"Refused (exit 3): the slot holds no drive, or the guest is not done with it\n"
"(powered off, or power indicator not on). Exit 0 when the new drive was kept,\n"
"1 when it was deleted, the add failed or the removal failed.\n"
"\n"
"--json: {\"command\":\"swap\",\"ok\":..,\"result\":\"kept\"|\"deleted\"|\"add-failed\"|\n"
"  \"remove-failed\",\"kept\":true,\"deleted\":false,\"delay_ms\":250,\"settle_s\":5.0,\n"
"  \"old\":{\"device\":\"nvme-s3\",\"serial\":..,\"node\":..},\"new\":{\"device\":\"nvme-s3-b\",\n"
"  \"serial\":\"lab1-s3-g1\",\"node\":\"swap-s3-1\",\"size\":..},\n"
"  \"removal\":{..one slot of remove --surprise..,\"paused_ms\":..},\n"
"  \"add\":{\"result\":\"added\"|\"failed\",\"error\":..,\"after_resume_ms\":250.3},\n"
"  \"resumed_ns\":..,\"added_ns\":..,\"new_deleted_ns\":..|null (CLOCK_REALTIME / QEMU event\n"
"  time), \"deleted_after_add_ms\":..|null, \"old_deleted_ns\":..,\n"
"  \"guest\":{\"power_off_ms\":..,\"indicator_off_ms\":..,\"power_on_ms\":..} (first time\n"
"  after the resume the slot registers showed it; polled, ~tens of ms; null if\n"
"  not seen), \"slot_after\":{..hpslot status of the slot at the end..}}\n";

static const char storm_summary[] =
"  storm --seed N --count K [--max-gap-ms M] [--orderly-percent P] [--wait S]\n"
"        [--settle S] [--dry-run] DOMAIN SLOT...  K seeded random removals and adds\n";
static const char storm_help[] =
"usage: hpslot storm --seed N --count K [--max-gap-ms M] [--orderly-percent P]\n"
"                    [--wait S] [--settle S] [--dry-run] [-c URI] [--json] DOMAIN SLOT...\n"
"\n"
"K random hotplug actions across the SLOTs, reproducible from the seed: the\n"
"action list is fixed by N, K, M, P and which SLOTs hold a drive at the start\n"
"(and printed first; --dry-run prints it and stops). Each step picks a SLOT\n"
"uniformly; an occupied one gets a removal -- orderly with probability P %\n"
"(default " HP_STR(HP_STORM_ORDERLY_DEFAULT) "), else surprise -- and an empty one an add; then a pause of\n"
"0..M ms (default " HP_STR(HP_STORM_MAX_GAP_DEFAULT) "; uniform). Removals and adds are those of `hpslot\n"
"remove --surprise` and `hpslot add`; an orderly removal is only started\n"
"(device_del: the guest's 5 s window runs while the storm goes on), after\n"
"waiting up to S s for the slot's power indicator to stop blinking. An add\n"
"waits (like add --wait S, default " HP_STR(HP_STORM_WAIT_S) ") until the slot's previous drive is gone\n"
"and the guest has torn the slot down. Plan and reality can part (an action\n"
"failed): a planned action that no longer fits the slot is skipped and\n"
"logged.\n"
"\n"
"At the end it waits up to --settle S seconds (default " HP_STR(HP_STORM_SETTLE_S) ") until every slot\n"
"has settled: no removal pending, and the slot registers steady -- occupied:\n"
"present, powered, power indicator on; empty: no device, powered off,\n"
"indicator off -- and prints the expected state of each slot (occupied +\n"
"serial, or empty) next to QEMU's.\n"
"\n"
"Exit 0 when every action was carried out, every slot settled and QEMU's\n"
"state equals the expected one; 1 otherwise (see the log); 3 refused.\n"
"\n"
"--json: {\"command\":\"storm\",\"ok\":..,\"seed\":N,\"count\":K,\"max_gap_ms\":M,\n"
"  \"orderly_percent\":P,\"initial\":[{\"slot\":3,\"occupied\":true,\"serial\":..}],\n"
"  \"plan\":[{\"i\":1,\"action\":\"surprise\"|\"orderly\"|\"add\",\"slot\":3,\"gap_ms\":412}],\n"
"  \"log\":[{\"i\":1,\"action\":..,\"slot\":3,\"t_s\":0.41,\"result\":\"ok\"|\"failed\"|\n"
"    \"skipped\",\"serial\":..,\"error\":..,\"waited_s\":..}],\"actions_failed\":0,\n"
"  \"settled\":true,\"settle_s\":3.2,\"final\":[{\"slot\":3,\"expected\":{\"occupied\":true,\n"
"    \"serial\":..},\"qemu\":{\"occupied\":true,\"serial\":..,\"device\":..,\"power\":\"on\",\n"
"    \"power_indicator\":\"on\",\"presence\":true},\"settled\":true,\"match\":true}],\n"
"  \"mismatches\":0}\n";

static const char aer_summary[] =
"  aer --error NAME [--correctable] DOMAIN SLOT...\n"
"                                                 inject an AER error at each SLOT's port\n";
static const char aer_help[] =
"usage: hpslot aer --error NAME [--correctable] [-c URI] [--json] DOMAIN SLOT...\n"
"\n"
"Injects an AER error at the root port of each SLOT, in order, with QEMU's HMP\n"
"`pcie_aer_inject_error [-c] PORT NAME`. The port is the target because QEMU's\n"
"nvme device has no AER capability (errors aimed at it are dropped). NAME is\n"
"QEMU's name of an uncorrectable error -- COMP_TIME (completion timeout,\n"
"non-fatal), SDN (surprise down, fatal), UNSUP, POISON_TLP, MAL_TLP, ... -- or\n"
"0xSTATUS (the AER status bits); --correctable makes it a correctable error\n"
"(QEMU 7.2 never signals those to the guest). Non-fatal errors are reported and\n"
"recovered by the guest's AER driver; fatal ones also reset the link (for a\n"
"hotplug port: a secondary bus reset through pciehp_reset_slot).\n"
"\n"
"The domain must be running. Exit 0 when QEMU accepted every injection (\"OK id:\"),\n"
"1 when one was refused.\n"
"\n"
"--json: {\"command\":\"aer\",\"ok\":..,\"error_injected\":\"SDN\",\"slots\":[{\"slot\":3,\n"
"  \"port\":\"pci.3\",\"injected\":true,\"at_realtime_ns\":..,\"monitor\":\"OK id: pci.3 ...\"}]}\n";

static const char absent_summary[] =
"  absent [--reset] DOMAIN [SLOT...]              reads that reached nothing below each\n"
"                                                 slot, by guest pc (lab QEMU; --reset zeroes)\n";
static const char absent_help[] =
"usage: hpslot absent [--reset] [-c URI] [--json] DOMAIN [SLOT...]\n"
"\n"
"How many reads reached nothing below each slot (all of the domain's root and\n"
"JBOF downstream ports, or the named SLOTs), and which guest instructions made\n"
"them: the lab's QEMU (lab_platform=fidelity, qemu/patches/0009) counts, per\n"
"port, every read the port forwarded to nothing -- MMIO that hit no BAR (a\n"
"removed drive's registers), config reads of absent functions (an empty\n"
"slot's enumeration included) -- while the port's x-completion-timeout-us is\n"
">= 0 (0 too), with the guest pc of each (the kernel's virtual address; map it\n"
"with System.map and the guest's _stext; 0: a read made by no vCPU). It keeps\n"
"32 distinct pcs a port, more are counted as \"other\". hpslot reads the port\n"
"properties x-absent-reads and x-absent-read-pcs with qom-get (again if a\n"
"read came in between, so that the pcs' counts add up to the total); --reset\n"
"then sets x-absent-reads to 0, which zeroes the count and the pcs (a read in\n"
"the moment between the read and the reset is lost).\n"
"\n"
"No pause, no config cycles, no lock: it runs beside any other hpslot, on a\n"
"running or paused domain. A port whose x-completion-timeout-us is -1 counts\n"
"nothing: its count is reported as null (\"counting\":false) and the exit\n"
"status is 1. On a QEMU without the properties (Debian's: lab_platform=stock)\n"
"nothing is read: exit 3.\n"
"\n"
"--json: {\"command\":\"absent\",\"ok\":..,\"domain\":..,\"reset\":false,\n"
"  \"slots\":[{\"slot\":1,\"port\":\"pci.1\",\"address\":\"00:02.0\",\"kind\":\"root-port\",\n"
"    \"completion_timeout_us\":0,\"counting\":true,\"absent_reads\":5,\n"
"    \"absent_read_pcs\":[{\"pc\":\"0xffffffff8152a1b4\",\"count\":4},\n"
"      {\"pc\":\"other\",\"count\":1}],\"reset\":true (with --reset),\"error\":..}]}\n"
"(absent_read_pcs: by count, descending; \"other\" last, when there is one).\n";


/* ---- the command table ------------------------------------------------- */

/* Every option's getopt_long value. An option that several commands take
 * (--serial, --wait, --settle) has one value, in each of their lists. */
enum {
	OPT_CONNECT = 'c',
	OPT_HELP = 'h',
	OPT_JSON = 0x100,	/* long options only from here on */
	OPT_ORDERLY, OPT_SURPRISE, OPT_CANCEL, OPT_TIMEOUT, OPT_WAIT_GUEST, OPT_QUIET_MS, OPT_STAGGER_MS,
	OPT_WHEN_MASKED, OPT_AFTER_MASK_MS, OPT_WHEN_RESET, OPT_AFTER_RESET_MS,
	OPT_SERIAL, OPT_SIZE, OPT_NODE, OPT_PROP, OPT_WAIT, OPT_FORCE,
	OPT_DELAY_MS, OPT_SETTLE,
	OPT_SEED, OPT_COUNT, OPT_MAX_GAP_MS, OPT_ORDERLY_PERCENT, OPT_DRY_RUN,
	OPT_ERROR, OPT_CORRECTABLE,
	OPT_RESET,
};
#define OPT_END { NULL, 0, NULL, 0 }

/* "-": the arguments that are no options come back in order (as 1), so
 * options may stand anywhere; ":": a missing value is told apart (':') */
#define SHORT_OPTS "-:c:h"

/* with every command, anywhere on the line */
static const struct option global_opts[] = {
	{ "connect", required_argument, NULL, OPT_CONNECT },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "help", no_argument, NULL, OPT_HELP },
	OPT_END
};

static const struct option status_opts[] = { OPT_END };

static const struct option remove_opts[] = {
	{ "orderly", no_argument, NULL, OPT_ORDERLY },
	{ "surprise", no_argument, NULL, OPT_SURPRISE },
	{ "cancel", no_argument, NULL, OPT_CANCEL },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "wait-guest", required_argument, NULL, OPT_WAIT_GUEST },
	{ "quiet-ms", required_argument, NULL, OPT_QUIET_MS },
	{ "stagger-ms", required_argument, NULL, OPT_STAGGER_MS },
	{ "when-masked", required_argument, NULL, OPT_WHEN_MASKED },
	{ "after-mask-ms", required_argument, NULL, OPT_AFTER_MASK_MS },
	{ "when-reset", required_argument, NULL, OPT_WHEN_RESET },
	{ "after-reset-ms", required_argument, NULL, OPT_AFTER_RESET_MS },
	OPT_END
};

static const struct option add_opts[] = {
	{ "serial", required_argument, NULL, OPT_SERIAL },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "node", required_argument, NULL, OPT_NODE },
	{ "prop", required_argument, NULL, OPT_PROP },
	{ "wait", required_argument, NULL, OPT_WAIT },
	{ "force", no_argument, NULL, OPT_FORCE },
	OPT_END
};

static const struct option swap_opts[] = {
	{ "delay-ms", required_argument, NULL, OPT_DELAY_MS },
	{ "serial", required_argument, NULL, OPT_SERIAL },
	{ "settle", required_argument, NULL, OPT_SETTLE },
	OPT_END
};

static const struct option storm_opts[] = {
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "count", required_argument, NULL, OPT_COUNT },
	{ "max-gap-ms", required_argument, NULL, OPT_MAX_GAP_MS },
	{ "orderly-percent", required_argument, NULL, OPT_ORDERLY_PERCENT },
	{ "wait", required_argument, NULL, OPT_WAIT },
	{ "settle", required_argument, NULL, OPT_SETTLE },
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
	OPT_END
};

static const struct option aer_opts[] = {
	{ "error", required_argument, NULL, OPT_ERROR },
	{ "correctable", no_argument, NULL, OPT_CORRECTABLE },
	OPT_END
};

static const struct option absent_opts[] = {
	{ "reset", no_argument, NULL, OPT_RESET },
	OPT_END
};

/* The commands: their options and texts. The handlers (cmd_status...)
 * are called by main.c (hpslot.h); this file stays free of libvirt. */
struct hp_command {
	const char *name;
	enum hp_cmd cmd;
	const struct option *opts;	/* its own options (besides global_opts) */
	const char *summary;		/* its lines in `hpslot --help` */
	const char *help;		/* `hpslot help NAME`, `hpslot NAME --help` */
};

static const struct hp_command commands[] = {
	{ "status", HP_CMD_STATUS, status_opts, status_summary, status_help },
	{ "remove", HP_CMD_REMOVE, remove_opts, remove_summary, remove_help },
	{ "add", HP_CMD_ADD, add_opts, add_summary, add_help },
	{ "swap", HP_CMD_SWAP, swap_opts, swap_summary, swap_help },
	{ "storm", HP_CMD_STORM, storm_opts, storm_summary, storm_help },
	{ "aer", HP_CMD_AER, aer_opts, aer_summary, aer_help },
	{ "absent", HP_CMD_ABSENT, absent_opts, absent_summary, absent_help },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct hp_command *command_of(enum hp_cmd c)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (commands[i].cmd == c)
			return &commands[i];
	return NULL;
}

const char *hp_cmd_name(enum hp_cmd c)
{
	const struct hp_command *cmd = command_of(c);

	return cmd ? cmd->name : "";
}

void hp_usage(FILE *f)
{
	fputs(usage_head, f);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fputs(commands[i].summary, f);
	fputs(usage_tail, f);
}

void hp_cmd_help(FILE *f, enum hp_cmd c)
{
	const struct hp_command *cmd = command_of(c);

	if (cmd)
		fputs(cmd->help, f);
	else
		hp_usage(f);
}

static int errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

int hp_parse_slotspec(const char *s, struct hp_slotspec *out)
{
	char *end;

	memset(out, 0, sizeof(*out));
	out->slot = -1;
	out->text = s;
	if (!strncmp(s, "pci.", 4)) {
		if (!isdigit((unsigned char)s[4]))
			return -1;
		errno = 0;
		long n = strtol(s + 4, &end, 10);
		if (errno || *end || n < 1 || n > 255 || strlen(s) >= sizeof(out->port))
			return -1;
		snprintf(out->port, sizeof(out->port), "pci.%ld", n);
		return 0;
	}
	if (!isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	long n = strtol(s, &end, 10);
	if (errno || *end || n < 0 || n > 8191)	/* 13-bit Physical Slot Number */
		return -1;
	out->slot = (int)n;
	return 0;
}

static int parse_seconds(const char *opt, const char *v, double min, double max, double *out,
			 char *err, size_t len)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(d) || d < min || d > max)
		return errf(err, len, "%s: '%s' is not a number of seconds in %g..%g", opt, v, min, max);
	*out = d;
	return 0;
}

static int parse_long(const char *opt, const char *v, long min, long max, long *out, const char *what,
		      char *err, size_t len)
{
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < min || n > max)
		return errf(err, len, "%s '%s': %s, %ld..%ld", opt, v, what, min, max);
	*out = n;
	return 0;
}

/* ---- the command line: one getopt_long loop ---------------------------- */

static const struct option *opt_by_val(const struct option *opts, int val)
{
	for (; opts->name; opts++)
		if (opts->val == val)
			return opts;
	return NULL;
}

static const struct option *opt_by_name(const struct option *opts, const char *name)
{
	for (; opts->name; opts++)
		if (!strcmp(opts->name, name))
			return opts;
	return NULL;
}

#define MAX_OPTS 40

/* Every option once, zero-terminated: global_opts, then each command's.
 * An option shared by commands must be the same in each list. */
static int all_options(struct option *all, char *err, size_t len)
{
	int n = 0;

	all[0] = (struct option)OPT_END;
	for (size_t l = 0; l <= NCOMMANDS; l++) {
		for (const struct option *o = l ? commands[l - 1].opts : global_opts; o->name; o++) {
			const struct option *same = opt_by_name(all, o->name), *val = opt_by_val(all, o->val);
			if (same && same == val && same->has_arg == o->has_arg)
				continue;
			if (same || val || n >= MAX_OPTS)
				return errf(err, len, "internal error: option --%s is defined twice or one too many",
					    o->name);
			all[n++] = *o;
			all[n] = (struct option)OPT_END;
		}
	}
	return 0;
}

/* getopt_long takes an unambiguous abbreviation (--ord for --orderly);
 * hpslot never did, so that a typo never passes as an option. el is the
 * argument that named o: "--NAME" or "--NAME=VALUE". */
static bool spelled_out(const char *el, const struct option *o)
{
	size_t n = strcspn(el, "=");

	return o && !strncmp(el, "--", 2) && n == strlen(o->name) + 2 && !strncmp(el + 2, o->name, n - 2);
}

/* "`hpslot swap` and `hpslot storm`": the commands that take option val */
static void owners(int val, char *buf, size_t len)
{
	size_t n = 0, k = 0, total = 0;

	for (size_t i = 0; i < NCOMMANDS; i++)
		total += opt_by_val(commands[i].opts, val) != NULL;
	buf[0] = 0;
	for (size_t i = 0; i < NCOMMANDS && n < len; i++) {
		if (!opt_by_val(commands[i].opts, val))
			continue;
		k++;
		n += (size_t)snprintf(buf + n, len - n, "%s`hpslot %s`",
				      k == 1 ? "" : k == total ? " and " : ", ", commands[i].name);
	}
}

/* "status, remove, add, swap, storm, aer or absent" */
static void command_names(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < NCOMMANDS && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s",
				      i == 0 ? "" : i + 1 == NCOMMANDS ? " or " : ", ", commands[i].name);
}

static enum hp_cmd command_by_name(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(name, commands[i].name))
			return commands[i].cmd;
	return HP_CMD_NONE;
}

/* what the options said beyond hp_args */
struct given {
	bool timeout, wait, wait_guest, stagger, after_mask, after_reset, count;
};

/* An option (c, its value v) into a; -1 with a message for a bad value. */
static int take_option(struct hp_args *a, struct given *g, int c, const char *v, char *err, size_t len)
{
	long n;
	char *end;
	const char *why;

	switch (c) {
	case OPT_HELP:
		a->help = true;
		break;
	case OPT_JSON:
		a->json = true;
		break;
	case OPT_CONNECT:
		if (!*v)
			return errf(err, len, "--connect needs a libvirt URI");
		a->uri = v;
		break;
	case OPT_ORDERLY:
	case OPT_SURPRISE: {
		enum hp_mode m = c == OPT_ORDERLY ? HP_MODE_ORDERLY : HP_MODE_SURPRISE;
		if (a->mode && a->mode != m)
			return errf(err, len, "--orderly and --surprise exclude each other");
		a->mode = m;
		break;
	}
	case OPT_CANCEL:
		a->cancel = true;
		break;
	case OPT_FORCE:
		a->force = true;
		break;
	case OPT_DRY_RUN:
		a->dry_run = true;
		break;
	case OPT_RESET:
		a->absent_reset = true;
		break;
	case OPT_CORRECTABLE:
		a->aer_correctable = true;
		break;
	case OPT_TIMEOUT:
		g->timeout = true;
		return parse_seconds("--timeout", v, 0.1, 3600, &a->timeout, err, len);
	case OPT_WAIT_GUEST:
		g->wait_guest = true;
		return parse_seconds("--wait-guest", v, 0, 600, &a->wait_guest, err, len);
	case OPT_QUIET_MS:
		return parse_long("--quiet-ms", v, 1, 60000, &a->quiet_ms, "milliseconds", err, len);
	case OPT_WHEN_MASKED:
		return parse_long("--when-masked", v, 1, 600000, &a->when_masked_ms, "milliseconds", err, len);
	case OPT_AFTER_MASK_MS:
		g->after_mask = true;
		return parse_long("--after-mask-ms", v, 0, 10000, &a->after_mask_ms, "milliseconds", err, len);
	case OPT_WHEN_RESET:
		return parse_long("--when-reset", v, 1, 600000, &a->when_reset_ms, "milliseconds", err, len);
	case OPT_AFTER_RESET_MS:
		g->after_reset = true;
		return parse_long("--after-reset-ms", v, 0, 10000, &a->after_reset_ms, "milliseconds", err, len);
	case OPT_STAGGER_MS:
		g->stagger = true;
		return parse_long("--stagger-ms", v, 0, 60000, &a->stagger_ms, "milliseconds", err, len);
	case OPT_WAIT:
		g->wait = true;
		return parse_seconds("--wait", v, 0, 3600, &a->wait, err, len);
	case OPT_SETTLE:
		a->settle_given = true;
		return parse_seconds("--settle", v, 0, 3600, &a->settle, err, len);
	case OPT_DELAY_MS:
		return parse_long("--delay-ms", v, 0, 600000, &a->delay_ms, "milliseconds", err, len);
	case OPT_SEED:
		errno = 0;
		a->seed = strtoull(v, &end, 0);
		if (errno || end == v || *end || v[0] == '-' || v[0] == '+' || isspace((unsigned char)v[0]))
			return errf(err, len, "--seed '%s': an unsigned 64-bit number (decimal or 0x hex)", v);
		a->seed_given = true;
		break;
	case OPT_COUNT:
		if (parse_long("--count", v, 1, HP_STORM_MAX_COUNT, &n, "a number of actions", err, len))
			return -1;
		a->count = (int)n;
		g->count = true;
		break;
	case OPT_MAX_GAP_MS:
		return parse_long("--max-gap-ms", v, 0, 600000, &a->max_gap_ms, "milliseconds", err, len);
	case OPT_ORDERLY_PERCENT:
		if (parse_long("--orderly-percent", v, 0, 100, &n, "a percentage", err, len))
			return -1;
		a->orderly_percent = (int)n;
		break;
	case OPT_SERIAL:
		if (!hp_valid_serial(v))
			return errf(err, len, "--serial '%s': an NVMe serial is 1..%d printable "
				    "characters without spaces, quotes, commas or <>&", v, HP_SERIAL_MAX);
		a->serial = v;
		break;
	case OPT_SIZE:
		errno = 0;
		n = strtol(v, &end, 10);
		if (errno || end == v || *end || n < 1 || n > 1048576)
			return errf(err, len, "--size '%s': a drive size in MiB, 1..1048576", v);
		a->size_mib = n;
		a->size_given = true;
		break;
	case OPT_ERROR:
		if (!hp_valid_aer_error(v))
			return errf(err, len, "--error '%s': an AER error name of QEMU's "
				    "pcie_aer_inject_error (e.g. COMP_TIME, SDN, UNSUP) or 0xSTATUS", v);
		a->aer_error = v;
		break;
	case OPT_PROP:
		if ((why = hp_prop_invalid(v)))
			return errf(err, len, "--prop '%s': %s", v, why);
		if (a->nprops >= HP_MAX_PROPS)
			return errf(err, len, "--prop: at most %d", HP_MAX_PROPS);
		a->props[a->nprops++] = v;
		break;
	case OPT_NODE:
		if (!*v || strlen(v) > 31 || !isalpha((unsigned char)v[0]) ||
		    strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != strlen(v))
			return errf(err, len, "--node '%s': a block node name is a letter followed by "
				    "letters, digits, '-', '_' or '.' (at most 31)", v);
		a->node = v;
		break;
	default:
		return errf(err, len, "internal error: option %d has no handler", c);
	}
	return 0;
}

#define MAX_POS (HP_MAX_SLOTS + 3)

static int positional(const char **pos, int *npos, const char *arg, char *err, size_t len)
{
	if (*npos >= MAX_POS)
		return errf(err, len, "too many arguments (at most %d slots)", HP_MAX_SLOTS);
	pos[(*npos)++] = arg;
	return 0;
}

/* The next option from getopt_long, checked: its val, 1 for an argument
 * that is no option (optarg), -1 at the end; '?' with a message in err
 * for an unknown option or a missing value. */
static int next_option(int argc, char **argv, const struct option *all, char *err, size_t len)
{
	const struct option *o;
	const char *el, *cur;
	int c, idx = -1;

	/* the argument getopt_long looks at (optind 0: it starts afresh at 1);
	 * a short option's own, since optind moves past it only at its end */
	cur = argv[optind ? optind : 1];
	c = getopt_long(argc, argv, SHORT_OPTS, all, &idx);
	switch (c) {
	case -1:
	case 1:
		return c;
	case ':':
		/* the last argument: an option without its value (optopt: its val) */
		el = argv[optind - 1];
		o = opt_by_val(all, optopt);
		if (!o || (!strncmp(el, "--", 2) && !spelled_out(el, o)))
			errf(err, len, "unknown option '%s' (see hpslot --help)", el);
		else
			errf(err, len, "option --%s needs a value", o->name);
		return '?';
	case '?':
		/* optopt: 0 for an unknown (or ambiguous) long option, a long
		 * option's val for one given a value it takes none of
		 * (--reset=1), else the letter of an unknown -X */
		if (optopt && optopt < OPT_JSON && optopt != OPT_HELP)
			errf(err, len, "unknown option '%s' (see hpslot --help)", cur);
		else
			errf(err, len, "unknown option '%s' (see hpslot --help)", argv[optind - 1]);
		return '?';
	}
	if (idx < 0) {
		/* -h, -c URI, -cURI: alone, as hpslot always took them (not -hc) */
		if (strcmp(cur, "-h") && (c != OPT_CONNECT || strncmp(cur, "-c", 2) || cur[2] == '-')) {
			errf(err, len, "unknown option '%s' (see hpslot --help)", cur);
			return '?';
		}
		o = opt_by_val(all, c);
	} else {
		/* the argument that named the option: before its value when that came apart */
		o = &all[idx];
		el = optarg && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
		if (!spelled_out(el, o)) {
			errf(err, len, "unknown option '%s' (see hpslot --help)", el);
			return '?';
		}
	}
	/* No value starts with "--": "--delay-ms --json" lacks the value, and
	 * the next call reads --json (or "--") as what it is. */
	if (optarg && optarg == argv[optind - 1] && !strncmp(optarg, "--", 2)) {
		optind--;
		errf(err, len, "option --%s needs a value", o->name);
		return '?';
	}
	return c;
}

int hp_parse_args(int argc, char **argv, struct hp_args *a, char *err, size_t len)
{
	struct option all[MAX_OPTS + 1];
	const char *pos[MAX_POS];
	int seen[MAX_OPTS];	/* the command options given, in the order of their first appearance */
	int npos = 0, nseen = 0, c;
	struct given g = { 0 };
	char names[96];

	memset(a, 0, sizeof(*a));
	a->uri = DEFAULT_URI;
	a->timeout = DEFAULT_TIMEOUT;
	a->size_mib = DEFAULT_SIZE_MIB;
	a->max_gap_ms = HP_STORM_MAX_GAP_DEFAULT;
	a->orderly_percent = HP_STORM_ORDERLY_DEFAULT;
	if (err && len)
		err[0] = 0;
	if (all_options(all, err, len))
		return -1;
	command_names(names, sizeof(names));

	/* Every option of every command is known here, so that its value is
	 * checked wherever it stands; whether it goes with the command is
	 * asked once the command is known (below). The first error is kept
	 * and the loop goes on to the end: a --json after a bad option still
	 * counts, and the error comes out as JSON. */
	char later[256];	/* the errors after the first (dropped) */
	char *e = err;
	size_t elen = len;
	opterr = 0;	/* the messages are ours */
	optind = 0;	/* glibc: start afresh (the tests parse many command lines) */
	while ((c = next_option(argc, argv, all, e, elen)) != -1) {
		int bad;
		if (c == '?') {
			bad = -1;
		} else if (c == 1) {
			bad = positional(pos, &npos, optarg, e, elen);
		} else {
			if (!opt_by_val(global_opts, c)) {
				int k = 0;
				while (k < nseen && seen[k] != c)
					k++;
				if (k == nseen)
					seen[nseen++] = c;
			}
			bad = take_option(a, &g, c, optarg, e, elen);
		}
		if (bad) {
			e = later;
			elen = sizeof(later);
		}
	}
	/* after "--": arguments only */
	for (; optind < argc; optind++)
		if (positional(pos, &npos, argv[optind], e, elen)) {
			e = later;
			elen = sizeof(later);
		}
	if (e != err)
		return -1;

	int k = 0;
	if (npos > 0 && !strcmp(pos[0], "help")) {
		a->help = true;
		if (npos > 1 && !(a->cmd = command_by_name(pos[1])))
			return errf(err, len, "unknown command '%s': use %s", pos[1], names);
		return 0;
	}
	if (npos > 0) {
		if (!(a->cmd = command_by_name(pos[0])))
			return errf(err, len, "unknown command '%s': use %s", pos[0], names);
		k = 1;
	}
	if (a->help)
		return 0;
	if (!a->cmd)
		return errf(err, len, "no command given: use %s (see hpslot --help)", names);
	if (k >= npos)
		return errf(err, len, "%s: no DOMAIN given", hp_cmd_name(a->cmd));
	a->domain = pos[k++];
	if (!*a->domain)
		return errf(err, len, "%s: empty DOMAIN name", hp_cmd_name(a->cmd));
	for (; k < npos; k++) {
		struct hp_slotspec *s = &a->slots[a->nslots];
		if (a->nslots >= HP_MAX_SLOTS)
			return errf(err, len, "too many slots (at most %d)", HP_MAX_SLOTS);
		if (hp_parse_slotspec(pos[k], s))
			return errf(err, len, "'%s' is not a slot: use a physical slot number (0..8191) "
				    "or a root port id like pci.3", pos[k]);
		for (int j = 0; j < a->nslots; j++)
			if (!strcmp(a->slots[j].text, pos[k]) ||
			    (s->slot >= 0 && a->slots[j].slot == s->slot) ||
			    (s->port[0] && !strcmp(a->slots[j].port, s->port)))
				return errf(err, len, "slot %s is named twice", pos[k]);
		a->nslots++;
	}

	/* which options go with the command: its list in the table */
	const struct hp_command *command = command_of(a->cmd);
	const char *cmd = command->name;
	for (int i = 0; i < nseen; i++) {
		char who[128];
		if (opt_by_val(command->opts, seen[i]))
			continue;
		owners(seen[i], who, sizeof(who));
		return errf(err, len, "%s: --%s belongs to %s; it does not go with `hpslot %s` (see hpslot help %s)",
			    cmd, opt_by_val(all, seen[i])->name, who, cmd, cmd);
	}
	if (a->cmd == HP_CMD_REMOVE) {
		if (!a->mode)
			return errf(err, len, "remove: say --orderly or --surprise");
		if (a->mode == HP_MODE_SURPRISE && (a->cancel || g.timeout))
			return errf(err, len, "remove --surprise takes no --cancel or --timeout");
		if (a->mode == HP_MODE_ORDERLY && a->quiet_ms)
			return errf(err, len, "--quiet-ms goes with remove --surprise");
		if (a->when_masked_ms && (a->mode != HP_MODE_SURPRISE || a->nslots != 1))
			return errf(err, len, "--when-masked goes with remove --surprise of exactly one SLOT");
		if (g.after_mask && !a->when_masked_ms)
			return errf(err, len, "--after-mask-ms goes with --when-masked");
		if (!g.after_mask)
			a->after_mask_ms = 20;
		if (a->when_reset_ms && (a->mode != HP_MODE_SURPRISE || a->nslots != 1))
			return errf(err, len, "--when-reset goes with remove --surprise of exactly one SLOT");
		if (a->when_reset_ms && a->when_masked_ms)
			return errf(err, len, "--when-reset and --when-masked exclude each other: the yank waits "
				    "for the port's Secondary Bus Reset (the lab's QEMU) or for the guest's mask "
				    "of Slot Control, not both");
		if (g.after_reset && !a->when_reset_ms)
			return errf(err, len, "--after-reset-ms goes with --when-reset");
		if (!g.after_reset)
			a->after_reset_ms = 20;
		if (a->mode == HP_MODE_ORDERLY && g.stagger)
			return errf(err, len, "--stagger-ms goes with remove --surprise");
		if (a->mode == HP_MODE_ORDERLY && g.wait_guest)
			return errf(err, len, "--wait-guest goes with remove --surprise (an orderly removal "
				    "ends when the guest is done)");
	}
	if (a->cmd != HP_CMD_STATUS && a->cmd != HP_CMD_ABSENT && a->nslots == 0)
		return errf(err, len, "%s: no SLOT given", cmd);
	if (a->cmd == HP_CMD_ADD && (a->serial || a->node) && a->nslots != 1)
		return errf(err, len, "add: --serial and --node name one drive: give exactly one SLOT");
	if (a->cmd == HP_CMD_SWAP) {
		if (a->nslots != 1)
			return errf(err, len, "swap: give exactly one SLOT");
		if (!a->settle_given)
			a->settle = HP_SWAP_SETTLE_DEFAULT;
	}
	if (a->cmd == HP_CMD_AER && !a->aer_error)
		return errf(err, len, "aer: --error NAME is required (e.g. COMP_TIME, SDN)");
	if (a->cmd == HP_CMD_STORM) {
		if (!a->seed_given)
			return errf(err, len, "storm: --seed N is required (the storm is reproducible from it)");
		if (!g.count)
			return errf(err, len, "storm: --count K is required");
		if (!a->settle_given)
			a->settle = HP_STORM_SETTLE_DEFAULT;
		if (!g.wait)
			a->wait = HP_STORM_WAIT_DEFAULT;
	}
	return 0;
}

/* ---- storm plan and swap ids (pure) ---------------------------------- */

uint64_t hp_rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

const char *hp_storm_kind_name(enum hp_storm_kind k)
{
	switch (k) {
	case HP_STORM_SURPRISE: return "surprise";
	case HP_STORM_ORDERLY: return "orderly";
	case HP_STORM_ADD: return "add";
	}
	return "?";
}

int hp_storm_plan(uint64_t seed, int count, long max_gap_ms, int orderly_percent, bool *occupied,
		  int nslots, struct hp_storm_action *out)
{
	uint64_t st = seed;

	if (count < 0 || nslots < 1 || max_gap_ms < 0 || orderly_percent < 0 || orderly_percent > 100)
		return -1;
	for (int i = 0; i < count; i++) {
		uint64_t r_slot = hp_rng_next(&st), r_kind = hp_rng_next(&st), r_gap = hp_rng_next(&st);
		int s = (int)(r_slot % (uint64_t)nslots);
		out[i].slot_idx = s;
		if (occupied[s])
			out[i].kind = (int)(r_kind % 100) < orderly_percent ? HP_STORM_ORDERLY : HP_STORM_SURPRISE;
		else
			out[i].kind = HP_STORM_ADD;
		occupied[s] = out[i].kind == HP_STORM_ADD;
		out[i].gap_ms = (long)(r_gap % (uint64_t)(max_gap_ms + 1));
	}
	return count;
}

static bool id_in_list(const char *list, const char *id)
{
	size_t l = strlen(id);
	for (const char *p = list; p && (p = strstr(p, id)); p += l)
		if ((p == list || p[-1] == ' ') && (p[l] == ' ' || !p[l]))
			return true;
	return false;
}

int hp_swap_device_id(int slot, const char *old_id, const char *present, char *out, size_t len)
{
	for (int k = 0; k < 26; k++) {
		char id[64];
		if (k == 0)
			snprintf(id, sizeof(id), "nvme-s%d", slot);
		else
			snprintf(id, sizeof(id), "nvme-s%d-%c", slot, 'a' + k);
		if ((old_id && !strcmp(id, old_id)) || id_in_list(present, id))
			continue;
		if (strlen(id) >= len)
			return -1;
		strcpy(out, id);
		return 0;
	}
	return -1;
}

/* ---- the per-domain lock file: names, wait, records (pure) ------------- */

const char *hp_lock_name_invalid(const char *domain)
{
	size_t n = domain ? strlen(domain) : 0;

	if (!n)
		return "it is empty";
	if (n > HP_LOCK_NAME_MAX)
		return "it is longer than " HP_STR(HP_LOCK_NAME_MAX) " characters";
	if (domain[0] == '.')
		return "it starts with '.'";
	for (const char *c = domain; *c; c++) {
		bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			  *c == '.' || *c == '_' || *c == '+' || *c == '-';
		if (!ok)
			return *c == '/' ? "it contains '/'" : "it contains a character outside [A-Za-z0-9._+-]";
	}
	return NULL;
}

int hp_parse_lock_wait(const char *s, double *out, char *err, size_t len)
{
	if (!s || !*s) {
		*out = HP_LOCK_WAIT_DEFAULT;
		return 0;
	}
	return parse_seconds("HPSLOT_LOCK_WAIT", s, 0, HP_LOCK_WAIT_MAX, out, err, len);
}

int hp_lock_holder_line(char *buf, size_t len, long pid, const char *cmd, long long since)
{
	int n = snprintf(buf, len, "pid=%ld cmd=%s since=%lld\n", pid, cmd && *cmd ? cmd : "hpslot", since);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

int hp_lock_pause_line(char *buf, size_t len, long pid, long long since)
{
	int n = snprintf(buf, len, "paused=1 pid=%ld since=%lld\n", pid, since);
	return n < 0 || (size_t)n >= len ? -1 : n;
}

/* a positive decimal that fits; 0 otherwise */
static long long record_num(const char *v, size_t n, long long max)
{
	long long x = 0;
	if (!n || n > 19)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return 0;
		x = x * 10 + (v[i] - '0');
	}
	return x <= max ? x : 0;
}

int hp_lock_record_parse(const char *text, struct hp_lock_record *r)
{
	int found = 0;

	memset(r, 0, sizeof(*r));
	for (const char *line = text; line && *line;) {
		const char *eol = strchr(line, '\n');
		size_t ll = eol ? (size_t)(eol - line) : strlen(line);
		long long pid = 0, since = 0;
		char cmd[sizeof(r->holder_cmd)] = "";
		bool paused = false, has_pid = false;

		for (size_t i = 0; i < ll;) {
			while (i < ll && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
				i++;
			size_t t = i;
			while (i < ll && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
				i++;
			const char *tok = line + t, *eq = memchr(tok, '=', i - t);
			if (!eq)
				continue;
			size_t kl = (size_t)(eq - tok), vl = i - t - kl - 1;
			const char *v = eq + 1;
			if (kl == 6 && !strncmp(tok, "paused", 6)) {
				paused = vl == 1 && *v == '1';
			} else if (kl == 3 && !strncmp(tok, "pid", 3)) {
				pid = record_num(v, vl, 0x7fffffff);
				has_pid = true;
			} else if (kl == 5 && !strncmp(tok, "since", 5)) {
				since = record_num(v, vl, 1LL << 40);
			} else if (kl == 3 && !strncmp(tok, "cmd", 3)) {
				size_t k = 0;
				for (size_t c = 0; c < vl && k < sizeof(cmd) - 1; c++)
					if (v[c] > ' ' && v[c] < 0x7f)
						cmd[k++] = v[c];
				cmd[k] = 0;
			}
		}
		if (paused) {
			r->paused = true;
			r->paused_pid = (long)pid;
			r->paused_since = since;
			snprintf(r->paused_line, sizeof(r->paused_line), "%.*s", (int)ll, line);
			found++;
		} else if (has_pid && !r->holder_pid) {
			r->holder_pid = (long)pid;
			r->holder_since = since;
			snprintf(r->holder_cmd, sizeof(r->holder_cmd), "%s", cmd);
			found++;
		}
		line = eol ? eol + 1 : NULL;
	}
	return found;
}
