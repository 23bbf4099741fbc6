"""Filters of the hotplug scenarios (quick-swap, storm, orderly-removal,
hot-add-bulk, aer-recovery): seeds, slot states from hpslot and labprobe, the guest/QEMU
comparison, and each scenario's per-iteration report and metrics."""

import hashlib
import json
import os
import sys

# shared helpers, one copy (lab/plugins/lab_common.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab_common import json_object, p50_max  # noqa: E402
# an iteration's report from its steps: the judge's (lab/plugins/lab_judge.py)
from lab_judge import _step_finding, lab_layout_and_steps, lab_step, lab_steps_report  # noqa: E402,F401


def lab_storm_seed(seed, run_id, vm_index):
    """The storm's seed of one VM: the profile's lab_storm_seed plus the VM's
    index - 1 when set (VM 1 gets the seed itself), else one derived from
    the run id and the VM's index; every VM of a run gets its own, and the
    record says which seed to replay."""
    if seed not in (None, "", "auto"):
        return int(seed) + int(vm_index) - 1
    digest = hashlib.sha256(f"{run_id}/{vm_index}".encode()).hexdigest()
    return int(digest[:8], 16)


def lab_slot_states(status_stdout, slots=None):
    """{slot: serial or None} from `hpslot status --json` (None: empty)."""
    report = json_object(status_stdout) or {}
    states = {}
    for s in report.get("slots", []):
        if slots is None or s["slot"] in [int(x) for x in slots]:
            drive = s.get("drive")
            states[s["slot"]] = (drive.get("serial") or "?") if drive else None
    return states


def lab_expect_arg(status_stdout, slots):
    """labprobe view --expect argument from QEMU's view: SLOT=SERIAL|SLOT=empty,..."""
    states = lab_slot_states(status_stdout, slots)
    return ",".join(f"{s}={states.get(int(s)) or 'empty'}" for s in slots)


def lab_layout_fix(status_stdout, drive_slots, slots, recycle=()):
    """What makes the slots the boot layout again (a drive in each drive slot,
    the others empty): {'extra': slots to empty (occupied non-drive slots),
    'missing': slots to fill (empty drive slots), 'ok': hpslot status
    answered}. Drive slots in `recycle` are emptied and refilled even when
    QEMU has a drive there: after a failed iteration the guest may hold a
    controller without a namespace that QEMU's view cannot tell apart."""
    report = json_object(status_stdout)
    if not report or not report.get("ok"):
        return {"ok": False, "extra": [], "missing": [], "recycled": [], "changed": False}
    states = lab_slot_states(status_stdout, slots)
    drive_slots = [int(s) for s in drive_slots]
    recycle = [s for s in (int(x) for x in recycle) if s in drive_slots]
    extra = [s for s in (int(x) for x in slots)
             if states.get(s) and (s not in drive_slots or s in recycle)]
    missing = [s for s in drive_slots if not states.get(s) or s in recycle]
    return {"ok": True, "extra": extra, "missing": missing, "recycled": recycle,
            "changed": bool(extra or missing)}


def lab_view_vs_qemu(view_stdout, status_stdout, slots):
    """Every slot as QEMU has it (hpslot status) next to what the guest sees
    (labprobe view): a list of mismatches, [] when they agree. Occupied
    means the same serial, the PCI function bound, a namespace block device;
    empty means no PCI function and no NVMe controller."""
    view = json_object(view_stdout) or {}
    qemu = lab_slot_states(status_stdout, slots)
    guest = {str(s.get("slot")): s for s in view.get("slots", [])}
    out = []
    for slot in (int(x) for x in slots):
        g = guest.get(str(slot))
        q = qemu.get(slot, "missing")
        if g is None or q == "missing":
            out.append({"slot": slot, "qemu": q, "guest": None,
                        "why": "no guest view" if g is None else "not in hpslot status"})
            continue
        seen = {"occupied": g.get("occupied"), "bound": g.get("bound"), "serial": g.get("serial"),
                "namespace": g.get("namespace"), "nvme": [c.get("name") for c in g.get("nvme", [])]}
        if q is None:
            if g.get("occupied") or g.get("nvme"):
                out.append({"slot": slot, "qemu": None, "guest": seen,
                            "why": "QEMU has no drive in the slot, the guest still has one"})
        elif not g.get("occupied"):
            out.append({"slot": slot, "qemu": q, "guest": seen, "why": "QEMU has a drive, the guest sees none"})
        elif g.get("serial") != q:
            out.append({"slot": slot, "qemu": q, "guest": seen, "why": "different serial"})
        elif not g.get("bound") or not g.get("namespace"):
            out.append({"slot": slot, "qemu": q, "guest": seen, "why": "drive not bound or no namespace"})
    return out


def lab_orderly_report(layout, view0, remove, gone, add, back, cancel, kept):
    """orderly-removal: the steps, plus QEMU's DEVICE_DELETED seen for the
    removal and the drive kept by the cancel."""
    rep = lab_layout_and_steps(layout, [view0, remove, gone, add, back, cancel, kept],
                               ["view-before", "remove", "view-gone", "add", "view-back", "cancel", "view-kept"])
    rm = (rep["steps"].get("remove") or {}).get("slots") or [{}]
    if rep["steps"].get("remove") and rm[0].get("device_deleted_ns") is None:
        rep["ok"] = False
        rep["findings"].append({"kind": "orderly", "line": "no DEVICE_DELETED event for the orderly removal",
                                "context": [json.dumps(rm[0], sort_keys=True)]})
    cn = (rep["steps"].get("cancel") or {}).get("slots") or [{}]
    if rep["steps"].get("cancel") and cn[0].get("result") != "kept":
        rep["ok"] = False
        rep["findings"].append({"kind": "orderly", "line": f"the cancelled removal did not keep the drive "
                                f"({cn[0].get('result')})", "context": [json.dumps(cn[0], sort_keys=True)]})
    return rep


# ---- quick-swap ------------------------------------------------------------

def _swap_summary(rep):
    if not rep:
        return {}
    keys = ["result", "delay_ms", "deleted_after_add_ms", "guest", "error", "errors"]
    out = {k: rep.get(k) for k in keys if rep.get(k) is not None}
    out["add"] = rep.get("add")
    out["new"] = rep.get("new")
    out["removal_result"] = (rep.get("removal") or {}).get("result")
    slot_after = rep.get("slot_after") or {}
    out["slot_after"] = {k: slot_after.get(k) for k in ("presence", "power", "power_indicator", "drive")}
    return out


def _since_yank(log, limit=60):
    """The kernel log from this swap's yank on: from the last-but-one
    'Card not present' (the yank; the last one is the guest's look at the
    slot after QEMU deleted the new drive), else the last `limit` lines."""
    hits = [i for i, line in enumerate(log) if "Card not present" in line]
    start = hits[-2] if len(hits) >= 2 else max(len(log) - limit, 0)
    return log[max(start, len(log) - limit):]


def lab_quickswap_delay(delay, swap, check, race_view=None, restore=None, restore_check=None):
    """One delay of quick-swap: outcome 'ok' (QEMU kept the new drive and the
    guest enumerated its serial), 'race' (QEMU deleted the new drive because
    the guest's teardown of the old one powered the slot off after the add;
    the guest then agrees the slot is empty, no stale state, clean log, and
    the slot was restored), or 'error' (anything else). A race is recorded
    as a finding (kind race) with the guest's kernel log and hpslot's report."""
    sw = lab_step(swap, "swap")
    ck = lab_step(check, "check")
    rep = sw["report"] or {}
    result = rep.get("result", "error")
    rec = {"delay_ms": int(delay), "swap": result, "guest_check": ck["ok"],
           "after_resume_ms": (rep.get("add") or {}).get("after_resume_ms"),
           "deleted_after_add_ms": rep.get("deleted_after_add_ms"),
           "guest_timeline_ms": rep.get("guest"),
           "new_serial": (rep.get("new") or {}).get("serial"),
           "present_after_s": None, "findings": []}
    drives = (ck["report"] or {}).get("drives") or []
    if drives:
        rec["present_after_s"] = drives[0].get("present_after_s")
    if result == "kept" and ck["ok"]:
        rec["outcome"] = "ok"
        return rec
    steps = [lab_step(s, n) for s, n in ((race_view, "race-view"), (restore, "restore"),
                                         (restore_check, "restore-check"))]
    view = steps[0]["report"] or {}
    swap_line = json.dumps(_swap_summary(rep), sort_keys=True)
    log = _since_yank(view.get("log") or [])
    if result == "deleted" and all(s["ok"] for s in steps):
        rec["outcome"] = "race"
        rec["findings"].append({
            "kind": "race",
            "line": (f"quick-swap {delay} ms: QEMU deleted the new drive "
                     f"{(rep.get('new') or {}).get('device')} {rep.get('deleted_after_add_ms')} ms after "
                     f"adding it: the guest powered the slot off while tearing down the old drive "
                     f"(guest: {json.dumps(rep.get('guest'))}); the guest then saw an empty slot"),
            "context": log + ["hpslot swap: " + swap_line]})
        return rec
    rec["outcome"] = "error"
    why = []
    if result == "kept" and not ck["ok"]:
        why.append("QEMU kept the new drive but the guest did not enumerate it")
    elif result != "deleted":
        why.append(f"hpslot swap: {result}")
    for s in [sw, ck] + steps:
        if s["ran"] and not s["ok"] and s["name"] not in ("swap", "check"):
            why.append(f"{s['name']} failed")
    rec["findings"].append({
        "kind": "quick-swap",
        "line": f"quick-swap {delay} ms: " + "; ".join(why or ["unexpected outcome"]),
        "context": log + ["hpslot swap: " + swap_line] +
                   [ln for s in [ck] + steps if s["ran"] and not s["ok"] for ln in _step_finding(s)["context"]]})
    for s in steps:
        rec["findings"] += (s["report"] or {}).get("findings", [])
    return rec


def lab_quickswap_metrics(iterations, delays):
    """iterations: per iteration the list of lab_quickswap_delay records.
    The smallest delay that worked in every iteration with every larger
    delay also working (null if even the largest did not), per-delay
    outcomes and timings, counts, and largest_delay_outlived_ms: when the
    largest delay raced because the guest's teardown outlived it, when the
    guest powered the slot off (ms after the resume)."""
    delays = [int(d) for d in delays]
    per = []
    for d in delays:
        recs = [r for it in iterations for r in it if r["delay_ms"] == d]
        per.append({"delay_ms": d, "outcomes": [r["outcome"] for r in recs],
                    "deleted_after_add_ms": [r.get("deleted_after_add_ms") for r in recs],
                    "present_after_s": [r.get("present_after_s") for r in recs],
                    "after_resume_ms": [r.get("after_resume_ms") for r in recs],
                    "guest_power_off_ms": [(r.get("guest_timeline_ms") or {}).get("power_off_ms") for r in recs]})
    smallest = None
    for p in sorted(per, key=lambda x: -x["delay_ms"]):
        if p["outcomes"] and all(o == "ok" for o in p["outcomes"]):
            smallest = p["delay_ms"]
        else:
            break
    outcomes = [o for p in per for o in p["outcomes"]]
    largest = [r for it in iterations for r in it if delays and r["delay_ms"] == max(delays)]
    slower = [(r.get("guest_timeline_ms") or {}).get("power_off_ms") for r in largest
              if lab_quickswap_slower_guest(r)]
    return {"smallest_working_delay_ms": smallest, "delays_ms": delays, "per_delay": per,
            "largest_delay_outlived_ms": slower or None,
            "swaps": len(outcomes),
            "ok": outcomes.count("ok"), "races": outcomes.count("race"), "errors": outcomes.count("error"),
            "clock": "host CLOCK_MONOTONIC from the resume after the yank to device_add"}


def lab_quickswap_slower_guest(record):
    """A race whose guest powered the slot off only after the new drive was
    added (hpslot's register polls: power_off_ms later than after_resume_ms):
    the guest's teardown took longer than the delay, which a starved 2-core
    host can make of any delay. False when either time is missing."""
    off = (record.get("guest_timeline_ms") or {}).get("power_off_ms")
    add = record.get("after_resume_ms")
    return record.get("outcome") == "race" and off is not None and add is not None and off > add


def lab_quickswap_iteration_ok(records, delays):
    """An iteration passes when every delay ran with outcome ok or race and
    the largest delay worked, or raced only because the guest's teardown was
    still running when the new drive came (lab_quickswap_slower_guest: no
    working delay was measured, and the race itself was checked clean)."""
    if len(records) != len(delays) or not records:
        return False
    largest = max(records, key=lambda r: r["delay_ms"])
    return all(r["outcome"] in ("ok", "race") for r in records) and (
        largest["outcome"] == "ok" or lab_quickswap_slower_guest(largest))


def lab_quickswap_reports(iterations, delays):
    """quick-swap's iteration reports for the judge: ok as
    lab_quickswap_iteration_ok says, with the findings of every delay that
    went wrong; a race of an iteration that passed is an observation (the
    record keeps it, it fails nothing), of one that failed a finding. An
    iteration that failed with nothing but races says why."""
    out = []
    for recs in iterations:
        ok = lab_quickswap_iteration_ok(recs, delays)
        found = [f for r in recs for f in r.get("findings", []) if not ok or f.get("kind") != "race"]
        seen = [f for r in recs for f in r.get("findings", []) if ok and f.get("kind") == "race"]
        if not ok and all(f.get("kind") == "race" for f in found):
            found.append({"kind": "quick-swap", "context": [],
                          "line": f"quick-swap: the largest delay ({max(int(d) for d in delays)} ms) did not "
                                  f"work, and the guest's teardown was done before the add"
                          if recs else "quick-swap: no delay ran"})
        out.append({"ok": ok, "findings": found, "observations": seen})
    return out


# ---- storm -------------------------------------------------------------------

def lab_storm_report(seed, view0, storm, status, view1, layout=None):
    """One storm iteration: the storm's own verdict (every action done,
    every slot settled, QEMU as expected), the guest's view after it (each
    slot as QEMU has it, no stale state, no finding since the start) and
    the comparison of the two."""
    names = ["view-before", "storm", "status", "view-after"]
    steps = [lab_step(r, n) for r, n in zip([view0, storm, status, view1], names)]
    sv = steps[1]["report"] or {}
    slots = [f["slot"] for f in sv.get("final", [])] or [i["slot"] for i in sv.get("initial", [])]
    mism = lab_view_vs_qemu((view1 or {}).get("stdout", ""), (status or {}).get("stdout", ""), slots) \
        if steps[2]["ran"] and steps[3]["ran"] else []
    findings = []
    for s in steps:
        if not s["ok"]:
            f = _step_finding(s)
            if s["name"] == "storm":
                bad = [a for a in sv.get("log", []) if a.get("result") != "ok"]
                f["context"] = (f["context"] + [json.dumps(a, sort_keys=True) for a in bad]
                                + [json.dumps(x, sort_keys=True) for x in sv.get("final", []) if not x.get("match")])[:60]
            findings.append(f)
        if s["name"] == "view-after":
            findings += (s["report"] or {}).get("findings", [])
    if mism:
        log = (steps[3]["report"] or {}).get("log") or []
        findings.append({"kind": "guest-vs-qemu", "line": f"storm seed {seed}: {len(mism)} slot(s) where the "
                         f"guest's view differs from QEMU's",
                         "context": [json.dumps(m, sort_keys=True) for m in mism]
                         + ["kernel log since the storm began (tail):"] + log[-40:]})
    if layout is not None and not layout.get("ok", True):
        findings += layout.get("findings", [])
    kinds = {}
    for a in sv.get("plan", []):
        kinds[a["action"]] = kinds.get(a["action"], 0) + 1
    return {"ok": all(s["ok"] for s in steps) and not mism and not findings, "seed": int(seed),
            "actions": sv.get("count"), "action_kinds": kinds,
            "actions_failed": sv.get("actions_failed"), "actions_skipped": sv.get("actions_skipped"),
            "qemu_mismatches": sv.get("mismatches"), "guest_mismatches": len(mism),
            "settled": sv.get("settled"), "settle_s": sv.get("settle_s"), "storm_s": sv.get("storm_s"),
            "final": [{"slot": f["slot"], "serial": (f.get("qemu") or {}).get("serial")} for f in sv.get("final", [])],
            "findings": findings}


def lab_storm_metrics(reports):
    return {"seeds": [r["seed"] for r in reports], "seed": reports[0]["seed"] if reports else None,
            "actions": sum(r["actions"] or 0 for r in reports),
            "action_kinds": [r["action_kinds"] for r in reports],
            "actions_failed": sum(r["actions_failed"] or 0 for r in reports),
            "actions_skipped": sum(r["actions_skipped"] or 0 for r in reports),
            "mismatches": sum((r["qemu_mismatches"] or 0) + r["guest_mismatches"] for r in reports),
            "qemu_mismatches": sum(r["qemu_mismatches"] or 0 for r in reports),
            "guest_mismatches": sum(r["guest_mismatches"] for r in reports),
            "settle_s": [r["settle_s"] for r in reports], "storm_s": [r["storm_s"] for r in reports],
            "final": [r["final"] for r in reports]}


# ---- orderly-removal and hot-add-bulk ------------------------------------------

def lab_orderly_metrics(reports):
    deleted, cancel = [], []
    for rep in reports:
        rm = (rep.get("steps") or {}).get("remove") or {}
        for s in rm.get("slots", []):
            deleted.append(s.get("deleted_after_s"))
        cn = (rep.get("steps") or {}).get("cancel") or {}
        for s in cn.get("slots", []):
            cancel.append(s.get("result"))
    return {"deleted_after_s": deleted, "cancel_results": cancel,
            "note": "deleted_after_s: device_del to QEMU's DEVICE_DELETED (the guest's 5 s abort window included)"}


def lab_hotadd_metrics(reports, drives):
    present, waited, guest_done = [], [], []
    for rep in reports:
        st = rep.get("steps") or {}
        for d in (st.get("drives") or {}).get("drives", []):
            present.append(d.get("present_after_s"))
        for s in (st.get("add") or {}).get("slots", []):
            waited.append(s.get("waited_s"))
        for s in (st.get("yank") or {}).get("slots", []):
            guest_done.append(s.get("guest_done_s"))
    return {"drives": int(drives), "present_after_s": present,
            "present_after_max_s": max([p for p in present if p is not None], default=None),
            "add_waited_s": waited, "teardown_done_s": guest_done,
            "note": "present_after_s counts from labprobe's start, after the add returned"}


def lab_aer_metrics(reports):
    """aer-recovery: per injected error, runs and failures, the AER
    service's recovery times (ms from the port's interrupt) and how the
    drive's fio job came through."""
    out = {}
    for rep in reports:
        m = out.setdefault(rep.get("error"), {"runs": 0, "failures": 0, "results": [], "slot_resets": [],
                                              "fio_outcomes": {}, "_begin": [], "_end": [], "_reset": []})
        m["runs"] += 1
        m["failures"] += 0 if rep.get("ok") else 1
        collect = (rep.get("steps") or {}).get("collect") or {}
        aer = collect.get("aer") or {}
        m["results"].append(aer.get("result"))
        m["slot_resets"].append(aer.get("slot_resets"))
        m["_begin"].append(aer.get("recovery_begin_ms"))
        m["_end"].append(aer.get("recovery_end_ms"))
        m["_reset"].append(aer.get("slot_reset_ms"))
        for s in collect.get("slots", []):
            outcome = s.get("fio_outcome", "none")
            m["fio_outcomes"][outcome] = m["fio_outcomes"].get(outcome, 0) + 1
    for m in out.values():
        m["recovery_begin_ms"] = p50_max(m.pop("_begin"))
        m["recovery_end_ms"] = p50_max(m.pop("_end"))
        m["slot_reset_ms"] = p50_max(m.pop("_reset"))
    return {"errors": out,
            "note": "ms from the first interrupt of the slot's root port (pciehp_isr is called first: the port "
                    "services share one MSI vector) to pcie_do_recovery's entry and return and to "
                    "pciehp_reset_slot; kprobes, CLOCK_MONOTONIC. fio outcomes: went-on (I/O still flowing at "
                    "the end of the watch), completed, io-error (ended with a plain I/O error)"}


class FilterModule:
    def filters(self):
        return {
            "lab_storm_seed": lab_storm_seed,
            "lab_slot_states": lab_slot_states,
            "lab_expect_arg": lab_expect_arg,
            "lab_layout_fix": lab_layout_fix,
            "lab_view_vs_qemu": lab_view_vs_qemu,
            "lab_step": lab_step,
            "lab_steps_report": lab_steps_report,
            "lab_layout_and_steps": lab_layout_and_steps,
            "lab_orderly_report": lab_orderly_report,
            "lab_quickswap_delay": lab_quickswap_delay,
            "lab_quickswap_metrics": lab_quickswap_metrics,
            "lab_quickswap_iteration_ok": lab_quickswap_iteration_ok,
            "lab_quickswap_reports": lab_quickswap_reports,
            "lab_storm_report": lab_storm_report,
            "lab_storm_metrics": lab_storm_metrics,
            "lab_orderly_metrics": lab_orderly_metrics,
            "lab_hotadd_metrics": lab_hotadd_metrics,
            "lab_aer_metrics": lab_aer_metrics,
        }
