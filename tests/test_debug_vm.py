"""Each of the gate's debug-kernel patterns matches a real kernel report
(heavy: boots the debug kernel, lockdep + KASAN + DEBUG_ATOMIC_SLEEP, under
TCG). With lab_canary and lab_canary_provoke, the canary of the i-th
scenario is no marked line but a report that kernel/modules/lab_provoke
provokes in the guest at the chosen scan: a circular lock order (lockdep),
a read past a kmalloc'd object (KASAN), might_sleep() with preemption off
(sleep-in-atomic). Each scenario must fail with a finding of its kind and
no kernel finding of another kind: a pattern that does not match what the
kernel prints leaves its scenario passing, and this test fails naming it.

Lockdep and KASAN report once a boot, so each kind gets a scenario of its
own in one VM; lockdep is off after the first report (and after KASAN's
taint), so the VM restarts before the next scenario (tasks/scenario-run.yml)
and each scenario's window starts with lockdep on."""

import pytest

from conftest import REPO, load_summary, playbook, remove_domain, tagged

PREFIX = tagged("pciehp-test-prov")
RUN_ID = tagged("test-provoke")
KINDS = ["lockdep", "kasan", "sleep-in-atomic"]
SCENARIOS = ["smoke", "storm", "hot-add-bulk"]
PROFILE = {
    "lab_kernel_variant": "debug", "lab_canary": True, "lab_canary_provoke": KINDS,
    "lab_scenarios": SCENARIOS, "lab_slots": 4, "lab_drives": 2, "lab_hotadd_drives": 2,
    "lab_storm_actions": 4, "lab_vm_memory_mib": 2048, "lab_boot_timeout": 1800,
    "lab_hung_task_timeout": 60, "lab_gone_timeout": 300,
}
# kinds findings.c gives to the lines of a step's own failure, not kernel reports
NOT_KERNEL = {"step", "race"}


@pytest.fixture(scope="module")
def provoke_run():
    remove_domain(f"{PREFIX}-1")
    r = playbook("lab_name_prefix=" + PREFIX, "lab_run_id=" + RUN_ID, PROFILE)
    remove_domain(f"{PREFIX}-1")
    summary = REPO / "results" / RUN_ID / "summary.json"
    assert summary.is_file(), "no summary.json:\n" + r.stdout[-6000:] + r.stderr[-2000:]
    assert r.returncode != 0, "the run passed with a provoked report in every scenario"
    return load_summary(summary)


@pytest.mark.heavy
def test_each_provoked_report_fails_its_scenario_with_its_kind(provoke_run):
    recs = {r["name"]: r for r in provoke_run["scenarios"] if r["name"] != "kernel-log"}
    assert sorted(recs) == sorted(SCENARIOS), sorted(recs)
    assert {r["variant"] for r in recs.values()} == {"debug"}
    for name, kind in zip(SCENARIOS, KINDS):
        rec = recs[name]
        canary = (rec.get("log_window") or {}).get("canary") or {}
        assert canary.get("provoke") == kind, (name, canary)
        assert canary.get("fired_at"), (name, "lab_provoke was never asked", rec.get("log_window"))
        assert rec["status"] == "fail", (name, rec["status"], rec["findings"])
        kernel = [f for f in rec["findings"] if f["kind"] not in NOT_KERNEL]
        assert any(f["kind"] == kind for f in kernel), (name, kind, [(f["kind"], f["line"]) for f in kernel])
        assert {f["kind"] for f in kernel} == {kind}, (name, kind, [(f["kind"], f["line"]) for f in kernel])
        assert (rec["log_window"].get("lockdep") or [None])[0] == "on", (name, rec["log_window"])
        if name != SCENARIOS[0]:
            assert (rec.get("lockdep_restart") or {}).get("ok"), (name, rec.get("lockdep_restart"))
