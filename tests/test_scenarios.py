"""The hotplug scenarios end to end: `ansible-playbook lab.yml` runs
quick-swap and storm on a small VM of its own and records both as passed,
with their metrics."""

import json

from conftest import REPO, playbook, remove_domain

PREFIX = "pciehp-sctest"
RUN_ID = "test-scenarios"


def test_quick_swap_and_storm_pass_with_their_metrics():
    try:
        r = playbook("lab_name_prefix=" + PREFIX, "lab_slots=6", "lab_drives=4", "lab_keep_vms=false",
                     "lab_run_id=" + RUN_ID,
                     {"lab_scenarios": ["quick-swap", "storm"],
                      "lab_quickswap_delays_ms": [2000, 0], "lab_quickswap_settle": 3,
                      "lab_storm_actions": 12, "lab_storm_max_gap_ms": 500, "lab_storm_seed": 4242})
    finally:
        remove_domain(f"{PREFIX}-1")
    summary_file = REPO / "results" / RUN_ID / "summary.json"
    assert summary_file.exists(), r.stdout[-6000:] + r.stderr[-2000:]
    records = {s["name"]: s for s in json.loads(summary_file.read_text())["scenarios"]}
    assert {"quick-swap", "storm"} <= set(records), (list(records), r.stdout[-4000:])

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
    # a race is never hidden: each one is a finding with the guest's log and hpslot's report
    assert len([f for f in qs["findings"] if f["kind"] == "race"]) == m["races"]
    for f in qs["findings"]:
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
