"""Filters of the scenarios that show the kernel series' patches stock vs
patched: sleep-replacement (0003-0004) and aer-reset-storm (0005-0007)."""

import os
import re
import sys

# shared helpers, one copy (lab/plugins/lab_common.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab_common import json_object  # noqa: E402


def _slot_view(view_report, slot):
    for s in (view_report or {}).get("slots") or []:
        if str(s.get("slot")) == str(slot):
            return s
    return {}


def _guest_sees(slot_view):
    """What the guest has in a slot: its first PCI function and controller."""
    pci = (slot_view.get("pci") or [{}])[0]
    nvme = (slot_view.get("nvme") or [{}])[0]
    return {"pci_dev": pci.get("dev"), "pci_ids": pci.get("ids"), "live_ids": pci.get("live_ids"),
            "class": pci.get("class"), "live_class": pci.get("live_class"), "driver": pci.get("driver"),
            "nvme": nvme.get("name"), "nvme_serial": nvme.get("serial"), "nvme_state": nvme.get("state"),
            "namespace": slot_view.get("namespace")}


# ---- sleep-replacement -------------------------------------------------------

REPLACEMENT_CHECKS = ("slot-as-expected", "pci-identity")


def lab_sleep_replacement_report(rep, slot, add_result, view_result):
    """An iteration of sleep-replacement from lab_layout_and_steps' report:
    the failed post-wake-up view becomes one finding that says what the
    guest kept ("slot N: after the wake-up the guest kept the old device:
    ..."), other failed checks stay findings of their own; plus what the
    guest showed and whether the kernel logged the replacement."""
    rep = dict(rep)
    steps = rep.get("steps") or {}
    add = steps.get("add") or json_object((add_result or {}).get("stdout", "")) or {}
    new = (add.get("slots") or [{}])[0]
    view = steps.get("view-after-wake") or {}
    before = _guest_sees(_slot_view(steps.get("view-before"), slot))
    after = _guest_sees(_slot_view(view, slot))
    failed = [c for c in view.get("checks") or [] if not c.get("ok")]
    kept_old = [c for c in failed if c.get("name") in REPLACEMENT_CHECKS]
    findings = [f for f in rep.get("findings") or [] if not f.get("line", "").startswith("view-after-wake failed")]
    if kept_old:
        findings.insert(0, {
            "kind": "replacement",
            "line": f"slot {slot}: after the wake-up the guest kept the old device: pci_dev {after['pci_ids']} "
                    f"(the device answers {after['live_ids']}), driver {after['driver']}, nvme serial "
                    f"{after['nvme_serial']} (the new device's is {new.get('serial')})",
            "context": [f"{c['name']}: {c['detail']}" for c in kept_old] + (view.get("log") or [])[-40:]})
    for c in failed:
        if c.get("name") not in REPLACEMENT_CHECKS and c.get("name") != "kernel-log-clean":
            findings.append({"kind": "step", "line": f"view-after-wake: {c['name']}: {c['detail']}",
                             "context": (view.get("log") or [])[-40:]})
    if view_result is not None and not (view_result or {}).get("skipped") and not view.get("checks"):
        findings.append({"kind": "step", "line": "view-after-wake gave no report",
                         "context": [str((view_result or {}).get("stderr", ""))[-2000:]]})
    log = view.get("log") or []
    rep["findings"] = findings
    rep["ok"] = bool(rep.get("ok")) and not findings
    rep["sleep"] = {
        "slot": int(slot),
        "before": before,
        "new_device": {"serial": new.get("serial"), "node": new.get("node"), "ids": "0x8086:0x5845"},
        "after_wake": after,
        "re_enumerated": bool(view.get("checks")) and not kept_old and after.get("nvme_serial") == new.get("serial"),
        "kept_old_device": bool(kept_old),
        # upstream logs the detection at debug level only (dynamic debug)
        "replacement_logged": any(re.search(r"device replaced during system sleep", line) for line in log),
        "view_seconds": view.get("seconds"),
        "view_looks": view.get("looks"),
    }
    return rep


def lab_sleep_replacement_metrics(reports):
    """Per iteration what the guest had after the wake-up, and the counts."""
    per = [dict(r.get("sleep") or {}, ok=r.get("ok")) for r in reports]
    return {
        "iterations": len(per),
        "re_enumerated": sum(1 for p in per if p.get("re_enumerated")),
        "kept_old_device": sum(1 for p in per if p.get("kept_old_device")),
        "replacement_logged": sum(1 for p in per if p.get("replacement_logged")),
        "per_iteration": per,
        "swap": "nvme 1b36:0010 -> nvme use-intel-id=true 8086:5845 (new serial, new empty block node), "
                "while the guest is in S3; QEMU's nvme has no Device Serial Number",
    }


# ---- aer-reset-storm -----------------------------------------------------------

STORM_KINDS = ("kept", "yank-same", "yank-other")


def lab_aer_storm_round(rep, round_no, kind, slot_a, slot_b, view_result, clean_result):
    """A round of aer-reset-storm from its steps' report: a yanked drive the
    guest still holds after A's reset becomes one finding ("slot A: the
    surprise removal during the slot's reset was lost: ..."); what the guest
    showed and whether the stale slot had to be cleaned."""
    rep = dict(rep)
    steps = rep.get("steps") or {}
    view = steps.get("view-after") or json_object((view_result or {}).get("stdout", "")) or {}
    a = _guest_sees(_slot_view(view, slot_a))
    b = _guest_sees(_slot_view(view, slot_b))
    failed = [c for c in view.get("checks") or [] if not c.get("ok")]
    lost = kind == "yank-same" and any(
        c.get("name") == "slot-as-expected" and f"slot {slot_a}:" in c.get("detail", "") for c in failed)
    findings = list(rep.get("findings") or [])
    if lost:
        findings = [f for f in findings if not f.get("line", "").startswith("view-after failed")]
        findings.insert(0, {
            "kind": "reset",
            "line": f"slot {slot_a}: the surprise removal during the slot's reset was lost: the guest still has "
                    f"pci_dev {a['pci_dev']} ({a['pci_ids']}, driver {a['driver']}) and nvme {a['nvme']} "
                    f"({a['nvme_state']}) of a drive QEMU no longer has",
            "context": [f"{c['name']}: {c['detail']}" for c in failed] + (view.get("log") or [])[-40:]})
        other = [c for c in failed if not (c.get("name") == "slot-as-expected" and f"slot {slot_a}:" in c["detail"])
                 and c.get("name") not in ("no-stale-pci-dev", "no-stale-nvme-ctrl", "kernel-log-clean")]
        for c in other:
            findings.append({"kind": "step", "line": f"view-after: {c['name']}: {c['detail']}", "context": []})
    # A kept drive's slot must not go through a removal: pciehp logging a
    # link or presence loss of A in a round without a yank at A means the
    # reset's own link flap was taken for a hot-unplug (the drive may come
    # back by itself, same serial, so the view alone does not show it).
    # "Slot(N): Link Down/Up ignored" is patched 0006 dropping the reset's
    # changes (upstream's pciehp_ignore_link_change()), not a teardown.
    flap = [line for line in view.get("log") or []
            if (f"Slot({slot_a}): Link Down" in line and "Link Down/Up ignored" not in line)
            or f"Slot({slot_a}): Card not present" in line]
    if kind != "yank-same" and flap:
        findings.insert(0, {
            "kind": "reset",
            "line": f"slot {slot_a}: the slot's own reset was taken for a removal: {flap[0].strip()}",
            "context": (view.get("log") or [])[-40:]})
    clean = clean_result if clean_result and not clean_result.get("skipped") else None
    if clean is not None and clean.get("rc") != 0:
        findings.append({"kind": "step", "line": f"slot {slot_a}: cleaning the stale slot failed "
                         f"(exit {clean.get('rc')})", "context": str(clean.get("stdout", ""))[-2000:].splitlines()})
    rep["findings"] = findings
    rep["ok"] = bool(rep.get("ok")) and not findings
    # yank-same: did the yank land in the guest's reset of A? The fidelity
    # QEMU: hpslot remove --when-reset yanked at most 102 ms after the
    # port's Secondary Bus Reset (when_reset.in_reset); Debian's: --when-masked
    # re-read Slot Control in the pause and the mask still held.
    act = (steps.get("act") or {}) if kind == "yank-same" else {}
    reset = act.get("when_reset") or {}
    masked = act.get("when_masked") or {}
    rep["round"] = {"round": int(round_no), "kind": kind, "ok": rep["ok"], "lost_removal": lost,
                    "spurious_teardown": kind != "yank-same" and bool(flap),
                    "in_reset": (reset.get("in_reset") if "when_reset" in act else masked.get("masked_at_yank"))
                    if kind == "yank-same" else None,
                    "trigger": "when-reset" if "when_reset" in act else "when-masked" if "when_masked" in act
                    else None,
                    "mask_seen_after_ms": masked.get("waited_ms"),
                    "reset_seen_after_ms": reset.get("waited_ms"),
                    "reset_to_yank_max_ms": reset.get("reset_to_yank_max_ms"),
                    "cleaned": clean is not None, "slot_a": a, "slot_b": b,
                    "view_seconds": view.get("seconds")}
    return rep


def lab_aer_storm_metrics(reports):
    """Per kind: rounds, rounds as expected, their rate; lost removals."""
    rounds = [r.get("round") or {} for r in reports]
    per_kind = {}
    for kind in STORM_KINDS:
        mine = [x for x in rounds if x.get("kind") == kind]
        ok = sum(1 for x in mine if x.get("ok"))
        per_kind[kind] = {"rounds": len(mine), "as_expected": ok,
                          "rate": round(ok / len(mine), 3) if mine else None}
    lost = sum(1 for x in rounds if x.get("lost_removal"))
    spurious = sum(1 for x in rounds if x.get("spurious_teardown"))
    yanks = per_kind["yank-same"]["rounds"]
    in_reset = [x for x in rounds if x.get("kind") == "yank-same" and x.get("in_reset")]
    return {
        "rounds": len(rounds),
        "per_kind": per_kind,
        "lost_removals": lost,
        "lost_removal_rate": round(lost / yanks, 3) if yanks else None,
        # resets of a slot whose drive stayed, taken for a removal
        "spurious_teardowns": spurious,
        # the rounds that test what patch 0006 is about: the yank landed in the reset
        "yanks_in_reset": len(in_reset),
        "lost_in_reset": sum(1 for x in in_reset if x.get("lost_removal")),
        "per_round": [{k: x.get(k) for k in ("round", "kind", "ok", "lost_removal", "spurious_teardown", "in_reset",
                                             "trigger", "mask_seen_after_ms", "reset_seen_after_ms",
                                             "reset_to_yank_max_ms",
                                             "cleaned", "view_seconds")}
                      for x in rounds],
        "limits": "Debian's QEMU keeps the link up across a Secondary Bus Reset, so a reset's own link change "
                  "(spurious_teardowns) happens only on the fidelity QEMU (qemu patch 0006). The yank is timed on "
                  "the port's Secondary Bus Reset there (hpslot remove --when-reset, qemu patch 0011: in_reset when "
                  "it came at most 102 ms after the reset), on Debian's QEMU by the guest's own mask of the slot "
                  "(hpslot remove --when-masked; kernels with patch 0006 set none: no yank-same rounds there). "
                  "On slots with an Attention Button (Debian's QEMU; the "
                  "fidelity QEMU unless lab_attention_button=false) 6.1 leaves Presence Detect Changed latched "
                  "across the reset and acts on it afterwards, so no removal is lost there on either kernel",
    }


# ---- pme-runtime-suspend -----------------------------------------------------

def _pme_port(result):
    rep = json_object((result or {}).get("stdout", "")) or {}
    return (rep.get("ports") or [{}])[0]


def lab_pme_runtime_report(rep, before, suspended):
    """An iteration of pme-runtime-suspend: its steps' report plus the port's
    PME state before and while runtime suspended."""
    rep = dict(rep)
    sus = json_object((suspended or {}).get("stdout", "")) or {}
    rep["pme"] = {"before": _pme_port(before), "suspended": _pme_port(suspended),
                  "kprobe_hits": sus.get("kprobe_hits"), "seconds_to_suspend": sus.get("seconds")}
    return rep


def lab_pme_runtime_metrics(reports):
    per = [dict(r.get("pme") or {}, ok=r.get("ok")) for r in reports]
    sus = [p.get("suspended") or {} for p in per]
    return {
        "iterations": len(per),
        "suspended": sum(1 for s in sus if s.get("runtime_status") == "suspended"),
        "pme_service_untouched_while_suspended": sum(
            1 for p, s in zip(per, sus) if s.get("runtime_status") == "suspended"
            and (p.get("kprobe_hits") or {}).get("pme_interrupt_enable") == 0
            and ((p.get("kprobe_hits") or {}).get("port_runtime_suspend") or 0) > 0),
        "per_iteration": per,
        "note": "QEMU 7.2's pcie-root-port has no PCI PM capability (runtime suspend leaves it in D0), "
                "emulates no PME and does not let the guest set Root Control's PME Interrupt Enable (reads "
                "0); kprobes count what the kernel does: pcie_pme_interrupt_enable() calls and portdrv's "
                "runtime suspends/resumes",
    }


class FilterModule:
    def filters(self):
        return {
            "lab_sleep_replacement_report": lab_sleep_replacement_report,
            "lab_sleep_replacement_metrics": lab_sleep_replacement_metrics,
            "lab_aer_storm_round": lab_aer_storm_round,
            "lab_aer_storm_metrics": lab_aer_storm_metrics,
            "lab_pme_runtime_report": lab_pme_runtime_report,
            "lab_pme_runtime_metrics": lab_pme_runtime_metrics,
        }
