"""Filters of the JBOF scenarios (jbof-drive-removal, jbof-yank,
jbof-concurrent): which slots to act on, and per-drive and whole-JBOF
removal times from labprobe collect."""

import os
import sys

# shared helpers, one copy (lab/plugins/lab_common.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab_common import json_object  # noqa: E402

# What QEMU 7.2 answers when a switch is hot-added (jbof-yank records it
# again on every run, so a QEMU that can do it would show).
SWITCH_HOTADD_NOTE = (
    "QEMU 7.2 can hot-add a switch's upstream port (x3130-upstream) into a root port, but not "
    "the downstream ports below it: the upstream port's internal bus has no hotplug handler "
    "(only slots -- root and downstream ports -- have one), so device_add answers \"Bus '...' does "
    "not support hotplugging\" (QEMU docs/pcie.txt: downstream ports can't be hot-plugged into an "
    "existing upstream port). A JBOF with its slots cannot come back by hotplug; the lab restores "
    "it by restarting the VM (destroy + start from the same definition: the switch, its ports and "
    "the same drive files cold-plugged again) and then checks and write-verifies its drives.")


def lab_jbof_drive_slots(jbof_map, jbofs=None, per_jbof=0):
    """Drive slots of the JBOFs numbered in `jbofs` (None/[]: every JBOF),
    the first `per_jbof` of each (0: all), JBOF by JBOF."""
    wanted = [int(j) for j in (jbofs or [])]
    out = []
    for j in jbof_map:
        if wanted and j["jbof"] not in wanted:
            continue
        slots = j["drive_slots"]
        out += slots[:int(per_jbof)] if int(per_jbof) > 0 else slots
    return out


def lab_jbof_of(jbof_map, number):
    """The JBOF numbered `number` (1-based)."""
    for j in jbof_map:
        if j["jbof"] == int(number):
            return j
    raise ValueError(f"no JBOF {number} in this VM (it has {len(jbof_map)})")


def lab_jbof_removal_times(reports, slot_map, step="collect"):
    """Per drive and per JBOF, from each iteration's labprobe collect (step
    name `step`): every drive's ms from the first pciehp interrupt to each
    phase, and per JBOF the time until its last drive (or, for a yank, the
    switch itself) was gone."""
    jbof_of = {str(s["slot"]): s.get("jbof") for s in slot_map}
    per_drive, per_jbof = [], {}
    for it, rep in enumerate(reports, 1):
        collect = (rep.get("steps") or {}).get(step) or {}
        for s in collect.get("slots", []):
            if not s.get("expected_gone") or str(s.get("slot")) not in jbof_of:
                continue
            ms = s.get("ms") or {}
            j = jbof_of.get(str(s.get("slot")))
            gone = max([v for v in (ms.get("pci_removed"), ms.get("blockdev_gone")) if v is not None], default=None)
            per_drive.append({"iteration": it, "slot": int(s["slot"]), "jbof": j, "gone_ms": gone,
                              "ms": {k: (round(v, 3) if v is not None else None) for k, v in ms.items()}})
            if j is not None and gone is not None:
                key = str(j)
                per_jbof.setdefault(key, {}).setdefault(it, []).append(gone)
    last = {j: [round(max(v), 3) for _, v in sorted(its.items())] for j, its in per_jbof.items()}
    return {"per_drive": per_drive, "jbof_last_gone_ms": last}


def lab_jbof_yank_times(reports, jbof_map, step="collect"):
    """Whole-JBOF yank: per iteration the JBOF, its drive count and the ms
    from the root port's first pciehp interrupt until everything below it
    was gone (the switch's own pci_dev removal comes last), and per drive
    when its block device and pci_dev were gone. Counted from the root
    port's interrupt, not from the first of the trace: in jbof-concurrent
    an orderly removal's button press and a drive yanked just before come
    earlier (a drive gone before the JBOF's yank reads negative)."""
    roots = {str(j["slot"]): j for j in jbof_map}
    out = []
    for it, rep in enumerate(reports, 1):
        collect = (rep.get("steps") or {}).get(step) or {}
        for s in collect.get("slots", []):
            j = roots.get(str(s.get("slot")))
            if not j or not s.get("expected_gone"):
                continue
            t0 = (s.get("ms") or {}).get("isr")

            def since(v):
                return round(v - t0, 3) if v is not None and t0 is not None else None
            below = [x for x in collect.get("slots", []) if x.get("expected_gone")
                     and int(x["slot"]) in j["drive_slots"]]
            gones = [max([v for v in ((x.get("ms") or {}).get("pci_removed"),
                                      (x.get("ms") or {}).get("blockdev_gone")) if v is not None], default=None)
                     for x in below]
            switch = since((s.get("ms") or {}).get("pci_removed"))
            drives = {str(x["slot"]): since(g) for x, g in zip(below, gones)}
            last = [v for v in list(drives.values()) + [switch] if v is not None]
            out.append({"iteration": it, "jbof": j["jbof"], "drives": len(j["drive_slots"]),
                        "switch_removed_ms": switch, "all_gone_ms": max(last) if last else None,
                        "drives_gone_ms": drives, "drives_traced": len([g for g in gones if g is not None]),
                        "from": "the root port's first pciehp hard interrupt"})
    return out


def lab_vm_restart_report(result):
    """The restart that brings a yanked JBOF back: ok, boot times or why not."""
    if result is None or result.get("skipped"):
        return {"ok": False, "ran": False}
    rep = {"ok": result.get("rc") == 0, "ran": True}
    rep.update(json_object(result.get("stdout", "")) or {})
    if not rep["ok"]:
        rep["error"] = (result.get("stderr") or "").strip().splitlines()[-5:]
    return rep


def lab_switch_hotadd(upstream, downstream):
    """QEMU's answers to hot-adding a switch (x3130-upstream into the
    emptied root port, then an xio3130-downstream into it)."""
    def answer(r):
        if r is None or r.get("skipped"):
            return "not tried"
        doc = json_object(r.get("stdout", "")) or {}
        if "return" in doc and r.get("rc") == 0:
            return "ok"
        err = doc.get("error", {}).get("desc") if isinstance(doc.get("error"), dict) else None
        return err or ((r.get("stderr") or "").strip().splitlines() or ["failed"])[-1]
    up, down = answer(upstream), answer(downstream)
    return {"upstream_port": up, "downstream_port": down,
            "switch_hot_add_possible": up == "ok" and down == "ok", "note": SWITCH_HOTADD_NOTE}


def lab_jbof_expect(slot_map, slots):
    """labprobe drives --expect SLOT=SERIAL,... with the boot serials of `slots`."""
    serial = {int(s["slot"]): s["drive"]["serial"] for s in slot_map if s.get("drive")}
    return ",".join(f"{int(s)}={serial[int(s)]}" for s in slots)


def lab_jbof_iteration(steps_report, restart, extra=None):
    """An iteration of a JBOF scenario: its steps' report (lab_steps_report)
    with the restart that brought the JBOF back; failed when that failed."""
    rep = dict(steps_report)
    rep["restart"] = restart
    rep.update(extra or {})
    # a step whose only failed check is the kernel-log gate is already
    # represented by the kernel's findings themselves (so that a known
    # kernel failure can match kernel/expected-failures/ and nothing else)
    findings = []
    for f in rep.get("findings", []):
        name = f.get("line", "").split(" failed (exit", 1)[0]
        step = (rep.get("steps") or {}).get(name) if f.get("kind") == "step" else None
        failed = [c["name"] for c in (step or {}).get("checks", []) if not c.get("ok")]
        if failed and set(failed) == {"kernel-log-clean"} and step.get("findings"):
            continue
        findings.append(f)
    rep["findings"] = findings
    if not (restart or {}).get("ok"):
        rep["ok"] = False
        rep["findings"] = list(rep.get("findings", [])) + [{
            "kind": "restart", "line": "the VM did not come back after the yank (vm-start failed)",
            "context": (restart or {}).get("error") or []}]
    return rep


def lab_orderly_results(result):
    """hpslot remove --orderly --json run asynchronously: per slot its
    result and seconds from device_del (the attention button) to DEVICE_DELETED."""
    doc = json_object((result or {}).get("stdout", "")) or {}
    return [{"slot": s.get("slot"), "result": s.get("result"), "deleted_after_s": s.get("deleted_after_s")}
            for s in doc.get("slots", [])]


class FilterModule:
    def filters(self):
        return {
            "lab_jbof_drive_slots": lab_jbof_drive_slots,
            "lab_jbof_of": lab_jbof_of,
            "lab_jbof_removal_times": lab_jbof_removal_times,
            "lab_jbof_yank_times": lab_jbof_yank_times,
            "lab_vm_restart_report": lab_vm_restart_report,
            "lab_switch_hotadd": lab_switch_hotadd,
            "lab_jbof_expect": lab_jbof_expect,
            "lab_jbof_iteration": lab_jbof_iteration,
            "lab_orderly_results": lab_orderly_results,
        }
