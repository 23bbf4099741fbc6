/* Command line parsing and help texts (pure; unit-tested). */
#include "hpslot.h"

#include <ctype.h>
#include <errno.h>
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
"         [--when-masked MS [--after-mask-ms D]] DOMAIN SLOT...\n"
"                                                 surprise removal of all SLOTs in one pause\n";
static const char remove_help[] =
"usage: hpslot remove --orderly [--cancel] [--timeout S] [-c URI] [--json] DOMAIN SLOT...\n"
"       hpslot remove --surprise [--wait-guest S] [--quiet-ms MS] [--stagger-ms MS]\n"
"                    [--when-masked MS [--after-mask-ms D]] [-c URI] [--json] DOMAIN SLOT...\n"
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
"  yanked, exit 1.\n"
"--stagger-ms MS (with --surprise): one pause a slot, in the order given,\n"
"  with MS ms of guest run time between them instead of one pause for all,\n"
"  e.g. a drive in a JBOF and then, MS ms later, the JBOF's root port -- so\n"
"  the guest is tearing the first slot down when the second goes.\n"
"--wait-guest S (with --surprise): after resuming, poll the slots' registers\n"
"  (ECAM, no pause) for up to S seconds and report when the guest powered each\n"
"  slot off (its pciehp finished unbinding the driver) and turned the power\n"
"  indicator off (teardown complete; a re-add is safe from then on). Polling\n"
"  resolution is a few tens of ms. Not reaching that state in S seconds is\n"
"  reported (guest_done false) but does not change the exit status.\n"
"\n"
"Re-adding into a slot right after a surprise removal races the guest's\n"
"teardown: `hpslot add` refuses until the guest has powered the slot off and\n"
"turned its indicator off (use add --wait S).\n"
"\n"
"--json: {\"command\":\"remove\",\"mode\":\"orderly\"|\"surprise\",\"ok\":..,\"domain\":..,\n"
"  surprise: \"paused_ms\":..,\"paused_qemu_ms\":..,\"stop_ns\":..,\"resumed_ns\":..,\n"
"  orderly: \"timeout_s\":20,\"cancel\":false,\n"
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


/* The commands: name and texts. */
struct hp_command {
	const char *name;
	enum hp_cmd cmd;
	const char *summary;	/* its lines in `hpslot --help` */
	const char *help;	/* `hpslot help NAME`, `hpslot NAME --help` */
};

static const struct hp_command commands[] = {
	{ "status", HP_CMD_STATUS, status_summary, status_help },
	{ "remove", HP_CMD_REMOVE, remove_summary, remove_help },
	{ "add", HP_CMD_ADD, add_summary, add_help },
	{ "swap", HP_CMD_SWAP, swap_summary, swap_help },
	{ "storm", HP_CMD_STORM, storm_summary, storm_help },
	{ "aer", HP_CMD_AER, aer_summary, aer_help },
	{ "absent", HP_CMD_ABSENT, absent_summary, absent_help },
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

/* "--opt=value" or "--opt value" / "-c value" / "-cvalue" */
static const char *optval(int argc, char **argv, int *i, const char *arg, const char *name,
			  char *err, size_t len)
{
	const char *eq = strchr(arg, '=');
	if (eq && !strncmp(arg, "--", 2))
		return eq + 1;
	if (!strncmp(arg, "-c", 2) && arg[1] == 'c' && arg[2])
		return arg + 2;
	if (*i + 1 >= argc) {
		errf(err, len, "option %s needs a value", name);
		return NULL;
	}
	return argv[++*i];
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

/* Option groups: which command each option belongs to. */
enum {
	G_REMOVE = 1 << 0,	/* --orderly --surprise --cancel --timeout --wait-guest --quiet-ms --stagger-ms
				 * --when-masked --after-mask-ms */
	G_ADD = 1 << 1,		/* --size --node --prop --force */
	G_SERIAL = 1 << 2,	/* --serial: add, swap */
	G_WAIT = 1 << 3,	/* --wait: add, storm */
	G_SETTLE = 1 << 4,	/* --settle: swap, storm */
	G_SWAP = 1 << 5,	/* --delay-ms */
	G_STORM = 1 << 6,	/* --seed --count --max-gap-ms --orderly-percent --dry-run */
	G_AER = 1 << 7,		/* --error --correctable */
	G_ABSENT = 1 << 8,	/* --reset */
};

static int allowed_groups(enum hp_cmd c)
{
	switch (c) {
	case HP_CMD_REMOVE: return G_REMOVE;
	case HP_CMD_ADD: return G_ADD | G_SERIAL | G_WAIT;
	case HP_CMD_SWAP: return G_SWAP | G_SERIAL | G_SETTLE;
	case HP_CMD_STORM: return G_STORM | G_WAIT | G_SETTLE;
	case HP_CMD_AER: return G_AER;
	case HP_CMD_ABSENT: return G_ABSENT;
	default: return 0;
	}
}

int hp_parse_args(int argc, char **argv, struct hp_args *a, char *err, size_t len)
{
	const char *pos[HP_MAX_SLOTS + 3];
	const char *first_opt[16] = { 0 };	/* first option seen of each group (bit index) */
	int npos = 0, groups = 0;
	bool dashdash = false, timeout_given = false, wait_given = false, wait_guest_given = false;
	bool stagger_given = false, after_mask_given = false;
	bool count_given = false;

	memset(a, 0, sizeof(*a));
	a->uri = DEFAULT_URI;
	a->timeout = DEFAULT_TIMEOUT;
	a->size_mib = DEFAULT_SIZE_MIB;
	a->max_gap_ms = HP_STORM_MAX_GAP_DEFAULT;
	a->orderly_percent = HP_STORM_ORDERLY_DEFAULT;
	if (err && len)
		err[0] = 0;

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const char *v;
		size_t nl;
		int g = 0;

		if (dashdash || arg[0] != '-' || !arg[1]) {
			if (npos >= (int)(sizeof(pos) / sizeof(pos[0])))
				return errf(err, len, "too many arguments (at most %d slots)", HP_MAX_SLOTS);
			pos[npos++] = arg;
			continue;
		}
		nl = strcspn(arg, "=");
#define IS(name) (strlen(name) == nl && !strncmp(arg, name, nl))
		if (!strcmp(arg, "--")) {
			dashdash = true;
		} else if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			a->help = true;
		} else if (!strcmp(arg, "--json")) {
			a->json = true;
		} else if (IS("-c") || IS("--connect") || (!strncmp(arg, "-c", 2) && arg[1] == 'c' && arg[2] != '-')) {
			if (!(v = optval(argc, argv, &i, arg, "--connect", err, len)))
				return -1;
			if (!*v)
				return errf(err, len, "--connect needs a libvirt URI");
			a->uri = v;
		} else if (!strcmp(arg, "--orderly") || !strcmp(arg, "--surprise")) {
			enum hp_mode m = arg[2] == 'o' ? HP_MODE_ORDERLY : HP_MODE_SURPRISE;
			if (a->mode && a->mode != m)
				return errf(err, len, "--orderly and --surprise exclude each other");
			a->mode = m;
			g = G_REMOVE;
		} else if (!strcmp(arg, "--cancel")) {
			a->cancel = true;
			g = G_REMOVE;
		} else if (!strcmp(arg, "--force")) {
			a->force = true;
			g = G_ADD;
		} else if (!strcmp(arg, "--dry-run")) {
			a->dry_run = true;
			g = G_STORM;
		} else if (IS("--timeout")) {
			if (!(v = optval(argc, argv, &i, arg, "--timeout", err, len)) ||
			    parse_seconds("--timeout", v, 0.1, 3600, &a->timeout, err, len))
				return -1;
			timeout_given = true;
			g = G_REMOVE;
		} else if (IS("--wait-guest")) {
			if (!(v = optval(argc, argv, &i, arg, "--wait-guest", err, len)) ||
			    parse_seconds("--wait-guest", v, 0, 600, &a->wait_guest, err, len))
				return -1;
			wait_guest_given = true;
			g = G_REMOVE;
		} else if (IS("--quiet-ms")) {
			long n;
			if (!(v = optval(argc, argv, &i, arg, "--quiet-ms", err, len)) ||
			    parse_long("--quiet-ms", v, 1, 60000, &n, "milliseconds", err, len))
				return -1;
			a->quiet_ms = n;
			g = G_REMOVE;
		} else if (IS("--when-masked")) {
			if (!(v = optval(argc, argv, &i, arg, "--when-masked", err, len)) ||
			    parse_long("--when-masked", v, 1, 600000, &a->when_masked_ms, "milliseconds", err, len))
				return -1;
			g = G_REMOVE;
		} else if (IS("--after-mask-ms")) {
			if (!(v = optval(argc, argv, &i, arg, "--after-mask-ms", err, len)) ||
			    parse_long("--after-mask-ms", v, 0, 10000, &a->after_mask_ms, "milliseconds", err, len))
				return -1;
			after_mask_given = true;
			g = G_REMOVE;
		} else if (IS("--stagger-ms")) {
			if (!(v = optval(argc, argv, &i, arg, "--stagger-ms", err, len)) ||
			    parse_long("--stagger-ms", v, 0, 60000, &a->stagger_ms, "milliseconds", err, len))
				return -1;
			stagger_given = true;
			g = G_REMOVE;
		} else if (IS("--wait")) {
			if (!(v = optval(argc, argv, &i, arg, "--wait", err, len)) ||
			    parse_seconds("--wait", v, 0, 3600, &a->wait, err, len))
				return -1;
			wait_given = true;
			g = G_WAIT;
		} else if (IS("--settle")) {
			if (!(v = optval(argc, argv, &i, arg, "--settle", err, len)) ||
			    parse_seconds("--settle", v, 0, 3600, &a->settle, err, len))
				return -1;
			a->settle_given = true;
			g = G_SETTLE;
		} else if (IS("--delay-ms")) {
			if (!(v = optval(argc, argv, &i, arg, "--delay-ms", err, len)) ||
			    parse_long("--delay-ms", v, 0, 600000, &a->delay_ms, "milliseconds", err, len))
				return -1;
			g = G_SWAP;
		} else if (IS("--seed")) {
			char *end;
			if (!(v = optval(argc, argv, &i, arg, "--seed", err, len)))
				return -1;
			errno = 0;
			a->seed = strtoull(v, &end, 0);
			if (errno || end == v || *end || v[0] == '-' || v[0] == '+' || isspace((unsigned char)v[0]))
				return errf(err, len, "--seed '%s': an unsigned 64-bit number (decimal or 0x hex)", v);
			a->seed_given = true;
			g = G_STORM;
		} else if (IS("--count")) {
			long n;
			if (!(v = optval(argc, argv, &i, arg, "--count", err, len)) ||
			    parse_long("--count", v, 1, HP_STORM_MAX_COUNT, &n, "a number of actions", err, len))
				return -1;
			a->count = (int)n;
			count_given = true;
			g = G_STORM;
		} else if (IS("--max-gap-ms")) {
			if (!(v = optval(argc, argv, &i, arg, "--max-gap-ms", err, len)) ||
			    parse_long("--max-gap-ms", v, 0, 600000, &a->max_gap_ms, "milliseconds", err, len))
				return -1;
			g = G_STORM;
		} else if (IS("--orderly-percent")) {
			long n;
			if (!(v = optval(argc, argv, &i, arg, "--orderly-percent", err, len)) ||
			    parse_long("--orderly-percent", v, 0, 100, &n, "a percentage", err, len))
				return -1;
			a->orderly_percent = (int)n;
			g = G_STORM;
		} else if (IS("--serial")) {
			if (!(v = optval(argc, argv, &i, arg, "--serial", err, len)))
				return -1;
			if (!hp_valid_serial(v))
				return errf(err, len, "--serial '%s': an NVMe serial is 1..%d printable "
					    "characters without spaces, quotes, commas or <>&", v, HP_SERIAL_MAX);
			a->serial = v;
			g = G_SERIAL;
		} else if (IS("--size")) {
			char *end;
			if (!(v = optval(argc, argv, &i, arg, "--size", err, len)))
				return -1;
			errno = 0;
			long n = strtol(v, &end, 10);
			if (errno || end == v || *end || n < 1 || n > 1048576)
				return errf(err, len, "--size '%s': a drive size in MiB, 1..1048576", v);
			a->size_mib = n;
			a->size_given = true;
			g = G_ADD;
		} else if (!strcmp(arg, "--reset")) {
			a->absent_reset = true;
			g = G_ABSENT;
		} else if (!strcmp(arg, "--correctable")) {
			a->aer_correctable = true;
			g = G_AER;
		} else if (IS("--error")) {
			if (!(v = optval(argc, argv, &i, arg, "--error", err, len)))
				return -1;
			if (!hp_valid_aer_error(v))
				return errf(err, len, "--error '%s': an AER error name of QEMU's "
					    "pcie_aer_inject_error (e.g. COMP_TIME, SDN, UNSUP) or 0xSTATUS", v);
			a->aer_error = v;
			g = G_AER;
		} else if (IS("--prop")) {
			const char *why;
			if (!(v = optval(argc, argv, &i, arg, "--prop", err, len)))
				return -1;
			if ((why = hp_prop_invalid(v)))
				return errf(err, len, "--prop '%s': %s", v, why);
			if (a->nprops >= HP_MAX_PROPS)
				return errf(err, len, "--prop: at most %d", HP_MAX_PROPS);
			a->props[a->nprops++] = v;
			g = G_ADD;
		} else if (IS("--node")) {
			if (!(v = optval(argc, argv, &i, arg, "--node", err, len)))
				return -1;
			if (!*v || strlen(v) > 31 || !isalpha((unsigned char)v[0]) ||
			    strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != strlen(v))
				return errf(err, len, "--node '%s': a block node name is a letter followed by "
					    "letters, digits, '-', '_' or '.' (at most 31)", v);
			a->node = v;
			g = G_ADD;
		} else {
			return errf(err, len, "unknown option '%s' (see hpslot --help)", arg);
		}
#undef IS
		if (g) {
			int bit = __builtin_ctz((unsigned)g);
			if (!first_opt[bit])
				first_opt[bit] = arg;
			groups |= g;
		}
	}

	int k = 0;
	if (npos > 0 && !strcmp(pos[0], "help")) {
		a->help = true;
		if (npos > 1) {
			for (enum hp_cmd c = HP_CMD_FIRST; c <= HP_CMD_LAST; c++)
				if (!strcmp(pos[1], hp_cmd_name(c)))
					a->cmd = c;
			if (!a->cmd)
				return errf(err, len, "unknown command '%s': use status, remove, add, swap, storm, aer or absent",
					    pos[1]);
		}
		return 0;
	}
	if (npos > 0) {
		for (enum hp_cmd c = HP_CMD_FIRST; c <= HP_CMD_LAST; c++)
			if (!strcmp(pos[0], hp_cmd_name(c)))
				a->cmd = c;
		if (!a->cmd)
			return errf(err, len, "unknown command '%s': use status, remove, add, swap, storm, aer or absent", pos[0]);
		k = 1;
	}
	if (a->help)
		return 0;
	if (!a->cmd)
		return errf(err, len, "no command given: use status, remove, add, swap, storm, aer or absent (see hpslot --help)");
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

	/* which options go with which command */
	int stray = groups & ~allowed_groups(a->cmd);
	const char *cmd = hp_cmd_name(a->cmd);
	if (a->cmd == HP_CMD_STATUS || a->cmd == HP_CMD_REMOVE || a->cmd == HP_CMD_ADD) {
		/* (the messages the first three commands always gave) */
		if (stray & G_REMOVE)
			return errf(err, len, "%s: --orderly, --surprise, --cancel, --timeout and --wait-guest belong "
				    "to `hpslot remove`", cmd);
		if (stray & (G_ADD | G_SERIAL | G_WAIT))
			return errf(err, len, "%s: --serial, --size, --node, --prop, --wait and --force belong to "
				    "`hpslot add`", cmd);
		if (stray & G_SWAP)
			return errf(err, len, "%s: %.*s belongs to `hpslot swap`", cmd, (int)strcspn(first_opt[5], "="),
				    first_opt[5]);
		if (stray & G_STORM)
			return errf(err, len, "%s: %.*s belongs to `hpslot storm`", cmd, (int)strcspn(first_opt[6], "="),
				    first_opt[6]);
		if (stray & G_SETTLE)
			return errf(err, len, "%s: --settle belongs to `hpslot swap` and `hpslot storm`", cmd);
		if (stray & G_AER)
			return errf(err, len, "%s: --error and --correctable belong to `hpslot aer`", cmd);
		if (stray & G_ABSENT)
			return errf(err, len, "%s: --reset belongs to `hpslot absent`", cmd);
	} else if (stray) {
		int bit = __builtin_ctz((unsigned)stray);
		return errf(err, len, "%s: option %.*s does not go with `hpslot %s` (see hpslot help %s)", cmd,
			    (int)strcspn(first_opt[bit], "="), first_opt[bit], cmd, cmd);
	}
	if (a->cmd == HP_CMD_REMOVE) {
		if (!a->mode)
			return errf(err, len, "remove: say --orderly or --surprise");
		if (a->mode == HP_MODE_SURPRISE && (a->cancel || timeout_given))
			return errf(err, len, "remove --surprise takes no --cancel or --timeout");
		if (a->mode == HP_MODE_ORDERLY && a->quiet_ms)
			return errf(err, len, "--quiet-ms goes with remove --surprise");
		if (a->when_masked_ms && (a->mode != HP_MODE_SURPRISE || a->nslots != 1))
			return errf(err, len, "--when-masked goes with remove --surprise of exactly one SLOT");
		if (after_mask_given && !a->when_masked_ms)
			return errf(err, len, "--after-mask-ms goes with --when-masked");
		if (!after_mask_given)
			a->after_mask_ms = 20;
		if (a->mode == HP_MODE_ORDERLY && stagger_given)
			return errf(err, len, "--stagger-ms goes with remove --surprise");
		if (a->mode == HP_MODE_ORDERLY && wait_guest_given)
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
		if (!count_given)
			return errf(err, len, "storm: --count K is required");
		if (!a->settle_given)
			a->settle = HP_STORM_SETTLE_DEFAULT;
		if (!wait_given)
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
