"""The kernel-log gate proven to fire (lab_canary): with it, labprobe
writes a marked WARNING line into each scenario's kernel-log window, at a
scan chosen from the run id (recorded in the record's log_window.canary),
or at the window's close; every scenario CI runs must then fail, with that
line as its only kernel finding. A gate that lost the line anywhere (a scan
that missed its window, a finding dropped on the way to the record, an
expected-failure entry that swallowed it) leaves a scenario passing, and
this test fails naming it."""
import re

import pytest

from conftest import LAB_VM_PROFILE, REPO, load_summary, playbook, remove_domain, tagged

PREFIX = tagged("pciehp-test-can")
RUN_ID = tagged("test-canary")
# the scenarios of the shared lab VM's run (conftest.lab_vm), as small
SCENARIOS = LAB_VM_PROFILE[-1]["lab_scenarios"]
# a step that failed because its scan found the canary (a failed check,
# exit 1), and the steps of the iteration that then did not run
STEP_FROM_LOG = re.compile(r"^[a-z-]+ failed \(exit 1\)(: kernel-log-clean)?$|^[a-z-]+: not run \(an earlier step failed\)$")
# quick-swap's races (the guest's teardown of the old drive powered the slot
# off after the add) are findings only of an iteration that failed by them
OUTCOMES = {"race"}


@pytest.fixture(scope="module")
def canary_run():
    remove_domain(f"{PREFIX}-1")
    r = playbook("lab_name_prefix=" + PREFIX, "lab_run_id=" + RUN_ID, "lab_canary=true", *LAB_VM_PROFILE)
    remove_domain(f"{PREFIX}-1")
    summary = REPO / "results" / RUN_ID / "summary.json"
    assert summary.is_file(), "no summary.json:\n" + r.stdout[-6000:] + r.stderr[-2000:]
    # every scenario failed: the run says so
    assert r.returncode != 0, "the run passed with a canary in every scenario"
    return load_summary(summary)


def test_every_scenario_fails_with_its_canary_alone(canary_run):
    recs = {r["name"]: r for r in canary_run["scenarios"]}
    assert sorted(recs) == sorted(SCENARIOS), sorted(recs)
    table = []
    for name in SCENARIOS:
        rec = recs[name]
        canary = (rec.get("log_window") or {}).get("canary") or {}
        table.append(f"{name}: {rec['status']}, armed for scan {canary.get('at_scan')}, "
                     f"written at {canary.get('fired_at')}")
        assert canary.get("line", "").startswith("WARNING: lab-canary "), (name, rec.get("log_window"))
        assert canary.get("fired_at"), (name, "the canary was never written", rec.get("log_window"))
        assert rec["status"] == "fail", (name, rec["status"], rec["findings"])
        kernel = [f for f in rec["findings"] if f["kind"] != "step" and f["kind"] not in OUTCOMES]
        steps = [f for f in rec["findings"] if f["kind"] == "step"]
        assert kernel and all(f["kind"] == "warning" and f["line"] == canary["line"] for f in kernel), \
            (name, [(f["kind"], f["line"]) for f in kernel])
        assert all(STEP_FROM_LOG.match(f["line"]) for f in steps), (name, [f["line"] for f in steps])
    print("\n".join(table))
