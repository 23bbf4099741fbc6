"""The hotplug scenarios end to end: the shared lab VM's run (conftest's
lab_vm) did quick-swap and storm at small sizes and recorded both as passed,
with their metrics; and the scenarios' filters without a VM."""

import json
import sys

from conftest import REPO


def test_quick_swap_and_storm_pass_with_their_metrics(lab_vm):
    records = {s["name"]: s for s in lab_vm.summary["scenarios"]}
    assert {"quick-swap", "storm"} <= set(records), list(records)

    qs = records["quick-swap"]
    assert qs["status"] == "pass", json.dumps(qs, indent=1)[:8000]
    assert qs["iterations"] == 1 and qs["failures"] == 0
    m = qs["metrics"]
    assert m["delays_ms"] == [2000, 0]
    assert [p["delay_ms"] for p in m["per_delay"]] == [2000, 0]
    assert all(p["outcomes"] and set(p["outcomes"]) <= {"ok", "race"} for p in m["per_delay"])
    assert m["per_delay"][0]["outcomes"] == ["ok"]
    assert m["smallest_working_delay_ms"] in (2000, 0)
    assert m["errors"] == 0 and m["ok"] + m["races"] == 2
    # a race is never hidden: each one of a passing iteration is an
    # observation (the judge fails a record on any finding) with the guest's
    # log and hpslot's report
    assert qs["findings"] == []
    races = qs.get("observations", [])
    assert len(races) == m["races"] and m["swaps"] == 2
    for f in races:
        assert f["kind"] == "race" and any(c.startswith("hpslot swap: ") for c in f["context"]), f

    st = records["storm"]
    assert st["status"] == "pass", json.dumps(st, indent=1)[:8000]
    m = st["metrics"]
    assert m["seed"] == 4242 and m["seeds"] == [4242]
    assert m["actions"] == 12 and m["actions_failed"] == 0
    assert m["mismatches"] == 0 and m["qemu_mismatches"] == 0 and m["guest_mismatches"] == 0
    assert sum(m["action_kinds"][0].values()) == 12
    assert "--seed 4242" in m["replay"]
    assert st["findings"] == []


# ---- the scenarios' filters, without a VM ------------------------------------

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_scenarios  # noqa: E402


def status(**slots):
    """hpslot status --json with the given slot -> serial (None: empty)."""
    return json.dumps({"ok": True, "slots": [
        {"slot": int(k[1:]), "drive": {"serial": v} if v else None} for k, v in slots.items()]})


def view(**slots):
    out = []
    for k, v in slots.items():
        s = {"slot": k[1:], "occupied": bool(v), "bound": bool(v), "serial": v or None,
             "namespace": "nvme0n1" if v else None, "nvme": [{"name": "nvme0"}] if v else []}
        out.append(s)
    return json.dumps({"ok": True, "slots": out})


def test_seed_is_the_profiles_or_derived_from_run_and_vm():
    assert lab_scenarios.lab_storm_seed(17, "r", 1) == 17
    assert lab_scenarios.lab_storm_seed("", "r", 1) == lab_scenarios.lab_storm_seed("", "r", 1)
    assert lab_scenarios.lab_storm_seed("", "r", 1) != lab_scenarios.lab_storm_seed("", "r", 2)


def test_layout_fix_and_expectations_from_hpslot_status():
    st = status(s1="a", s2=None, s3="c", s4=None)
    assert lab_scenarios.lab_layout_fix(st, [1, 2], [1, 2, 3, 4]) == \
        {"ok": True, "extra": [3], "missing": [2], "recycled": [], "changed": True}
    # recycled drive slots are emptied when occupied and refilled either way;
    # a slot that is not a drive slot is never refilled
    assert lab_scenarios.lab_layout_fix(st, [1, 2], [1, 2, 3, 4], recycle=[1, 2, 3]) == \
        {"ok": True, "extra": [1, 3], "missing": [1, 2], "recycled": [1, 2], "changed": True}
    assert lab_scenarios.lab_expect_arg(st, [1, 2, 3]) == "1=a,2=empty,3=c"
    assert not lab_scenarios.lab_layout_fix("not json", [1], [1])["ok"]


def test_guest_and_qemu_views_compared_slot_by_slot():
    st = status(s1="a", s2=None, s3="c")
    assert lab_scenarios.lab_view_vs_qemu(view(s1="a", s2=None, s3="c"), st, [1, 2, 3]) == []
    bad = lab_scenarios.lab_view_vs_qemu(view(s1="x", s2="b", s3=None), st, [1, 2, 3])
    assert [(m["slot"], m["why"]) for m in bad] == [
        (1, "different serial"), (2, "QEMU has no drive in the slot, the guest still has one"),
        (3, "QEMU has a drive, the guest sees none")]


def test_quick_swap_outcomes_and_smallest_working_delay():
    ok = {"rc": 0, "stdout": "{}"}
    kept = {"rc": 0, "stdout": json.dumps({"result": "kept", "new": {"serial": "s-g1"}})}
    deleted = {"rc": 1, "stdout": json.dumps({"result": "deleted", "new": {"serial": "s-g2", "device": "nvme-s1-b"},
                                              "deleted_after_add_ms": 50})}
    rview = {"rc": 0, "stdout": json.dumps({"log": ["x", "[1] Card not present", "[2] Card not present"]})}
    skipped = {"skipped": True}
    recs = [lab_scenarios.lab_quickswap_delay(1000, kept, ok),
            lab_scenarios.lab_quickswap_delay(500, deleted, skipped, rview, ok, ok),
            lab_scenarios.lab_quickswap_delay(0, kept, ok),
            lab_scenarios.lab_quickswap_delay(100, kept, {"rc": 1, "stdout": "{}"}, rview, skipped, skipped)]
    assert [r["outcome"] for r in recs] == ["ok", "race", "ok", "error"]
    race = recs[1]["findings"][0]
    assert race["kind"] == "race" and race["context"][0] == "[1] Card not present"
    assert race["context"][-1].startswith("hpslot swap: ")
    m = lab_scenarios.lab_quickswap_metrics([recs[:3]], [1000, 500, 0])
    assert m["smallest_working_delay_ms"] == 1000 and m["races"] == 1 and m["ok"] == 2
    assert lab_scenarios.lab_quickswap_iteration_ok(recs[:3], [1000, 500, 0])
    assert not lab_scenarios.lab_quickswap_iteration_ok(recs, [1000, 500, 0, 100])
    assert lab_scenarios.lab_quickswap_metrics([[recs[1]]], [500])["smallest_working_delay_ms"] is None


def test_quick_swap_largest_delay_may_race_only_with_a_guest_slower_than_it():
    """A race at the largest delay passes only when the guest powered the
    slot off after the new drive came (its teardown outlived the delay, as a
    starved host makes it); before the add, or with no timeline, it fails."""
    ok = {"rc": 0, "stdout": "{}"}
    rview = {"rc": 0, "stdout": json.dumps({"log": []})}

    def race(power_off_ms, after_resume_ms=2000):
        sw = {"rc": 1, "stdout": json.dumps({
            "result": "deleted", "new": {"serial": "s-g2", "device": "d"}, "deleted_after_add_ms": 40,
            "add": {"after_resume_ms": after_resume_ms}, "guest": {"power_off_ms": power_off_ms}})}
        return lab_scenarios.lab_quickswap_delay(2000, sw, {"skipped": True}, rview, ok, ok)
    kept = {"rc": 0, "stdout": json.dumps({"result": "kept", "new": {"serial": "s-g1"}})}
    small = lab_scenarios.lab_quickswap_delay(0, kept, ok)
    assert lab_scenarios.lab_quickswap_iteration_ok([race(2600), small], [2000, 0])
    assert lab_scenarios.lab_quickswap_metrics([[race(2600), small]], [2000, 0])["largest_delay_outlived_ms"] == [2600]
    assert not lab_scenarios.lab_quickswap_iteration_ok([race(1500), small], [2000, 0])
    assert not lab_scenarios.lab_quickswap_iteration_ok([race(None), small], [2000, 0])
    assert lab_scenarios.lab_quickswap_metrics([[race(1500), small]], [2000, 0])["largest_delay_outlived_ms"] is None
