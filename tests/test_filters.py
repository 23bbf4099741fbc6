"""The lab's filter plugins: the slot map and results logic, without a VM."""

import json
import re
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_profile  # noqa: E402
import lab_results  # noqa: E402
sys.path.insert(0, str(REPO / "lab/plugins"))
import lab_judge  # noqa: E402
import lab_scenarios  # noqa: E402
import lab_topology  # noqa: E402
from ansible.errors import AnsibleFilterError  # noqa: E402

BASE = {"lab_vms": 1, "lab_slots": 16, "lab_drives": 8, "lab_kernel_variant": "patched",
        "lab_scenarios": ["smoke"], "lab_iterations": 1, "lab_chassis": 1,
        "lab_slot_numbers": [], "lab_platform": "stock"}


def profile(**kw):
    """The validate phase's two steps: each field against lab/profile.yml,
    then the relations between fields."""
    values = {"lab_results_root": str(REPO / "results"), **BASE, **kw}
    checked = lab_profile.lab_profile_check(values, [], {}, ["smoke", "storm"])
    return lab_topology.lab_validate_profile(checked, ["smoke", "storm"])


def test_first_29_ports_take_function_0_then_multifunction():
    slots = lab_topology.lab_slot_map(profile(lab_slots=40, lab_drives=0), 1)
    assert [s["address"] for s in slots[:3]] == ["00:02.0", "00:03.0", "00:04.0"]
    assert slots[28]["address"] == "00:1e.0"
    assert slots[29]["address"] == "00:02.1" and slots[35]["address"] == "00:02.7"
    assert slots[36]["address"] == "00:03.1"
    assert slots[0]["multifunction"] and slots[1]["multifunction"] and not slots[2]["multifunction"]
    assert len({s["address"] for s in slots}) == 40


def test_maximum_topology_is_addressable_and_one_more_is_refused():
    slots = lab_topology.lab_slot_map(profile(lab_slots=lab_topology.MAX_SLOTS, lab_drives=0), 1)
    assert len({s["address"] for s in slots}) == lab_topology.MAX_SLOTS
    with pytest.raises(AnsibleFilterError, match="lab_slots"):
        profile(lab_slots=lab_topology.MAX_SLOTS + 1)


def test_drives_fill_the_first_slots_with_unique_ids_and_short_serials():
    slots = lab_topology.lab_slot_map(profile(lab_slots=32, lab_drives=32, lab_vms=64), 64)
    drives = [s["drive"] for s in slots]
    assert all(drives)
    assert len({d["serial"] for d in drives}) == 32 and max(len(d["serial"]) for d in drives) <= 20
    assert drives[0] == {"id": "nvme-s1", "node": "drive-s1", "serial": "lab64-s1-g0", "file": "drive-s1.raw"}


@pytest.mark.parametrize("kw,needle", [
    ({"lab_slots": 0}, "lab_slots"), ({"lab_drives": 17}, "lab_drives"),
    ({"lab_kernel_variant": "x"}, "lab_kernel_variant"), ({"lab_scenarios": ["nope"]}, "nope"),
    ({"lab_scenarios": []}, "lab_scenarios"), ({"lab_iterations": 0}, "lab_iterations"),
    ({"lab_slots": 2, "lab_drives": 1, "lab_slot_numbers": [5, 5]}, "duplicate chassis/slot"),
    ({"lab_slots": 2, "lab_drives": 1, "lab_slot_numbers": [5]}, "lab_slot_numbers"),
    ({"lab_chassis": 256}, "lab_chassis"), ({"lab_platform": "kvm"}, "lab_platform"),
    ({"lab_aer_errors": ["comp_time"]}, "lab_aer_errors"), ({"lab_aer_errors": "SDN"}, "lab_aer_errors"),
    ({"lab_platform": "fidelity", "lab_completion_timeout_us": -1}, "lab_completion_timeout_us"),
    ({"lab_platform": "fidelity", "lab_completion_timeout_us": 2000000}, "lab_completion_timeout_us"),
    ({"lab_platform": "stock", "lab_completion_timeout_us": 10000}, "needs lab_platform=fidelity"),
])
def test_bad_profiles_name_the_field(kw, needle):
    with pytest.raises(AnsibleFilterError, match=needle):
        profile(**kw)


def test_fidelity_platform_and_its_completion_timeout():
    p = profile(lab_platform="fidelity", lab_completion_timeout_us="50000")
    assert p["lab_platform"] == "fidelity" and p["lab_completion_timeout_us"] == 50000
    assert profile()["lab_completion_timeout_us"] == 0


def test_disconnect_metrics_compare_the_flag_settings():
    def rep(ms):
        return {"ok": True, "steps": {"collect": {"last_gone_ms": ms, "slots": []}, "yank": {"paused_ms": 1}}}
    m = lab_results.lab_disconnect_metrics(
        {"10000": {"marked": [rep(10), rep(40)], "unmarked": [rep(30), rep(200)]}}, [1, 8], "fidelity")
    assert m["T_ms"] == {"10000": {"marked": {"1": 10, "8": 40}, "unmarked": {"1": 30, "8": 200}}}
    assert m["unmarked_over_marked"] == {"10000": {"1": 3.0, "8": 5.0}}
    assert m["phases"]["10000"]["marked"]["8"]["last_gone_ms"]


def test_disconnect_metrics_take_the_median_of_repeated_yanks():
    """lab_disconnect_repeats: each size yanked several times, interleaved;
    T(N) is the median, the phases and breakdown the median yank's, the
    absent reads every yank's; a count missing from one yank is missing."""
    def rep(ms, absent=0):
        return {"ok": True, "absent": {"total": absent, "by_slot": {"1": absent}, "by_function":
                                       {"f": absent} if absent else {}, "by_symbol": {}},
                "steps": {"collect": {"last_gone_ms": ms, "slots": []}, "yank": {"paused_ms": 1}}}
    runs = [1, 32, 1, 32, 1, 32]
    reps = [rep(50), rep(300), rep(240, 2), rep(560), rep(46), rep(330)]
    m = lab_results.lab_disconnect_metrics({"0": {"marked": reps}}, runs, "fidelity")
    assert m["sizes"] == [1, 32] and m["yanks_per_size"] == {"1": 3, "32": 3}
    assert m["T_ms"]["0"]["marked"] == {"1": 50, "32": 330}
    assert m["T_runs_ms"]["0"]["marked"] == {"1": [50, 240, 46], "32": [300, 560, 330]}
    assert m["median_yank"]["0"]["marked"] == {"1": 0, "32": 2}
    assert m["phases"]["0"]["marked"]["32"]["last_gone_ms"]["max"] == 330
    assert m["absent_reads"]["0"]["marked"]["1"] == {"total": 2, "by_slot": {"1": 2}, "by_function": {"f": 2},
                                                     "by_symbol": {}, "yanks": 3}
    # an even count: the lower median yank's breakdown, the mean of the two as T
    m = lab_results.lab_disconnect_metrics({"0": {"marked": reps[:4]}}, runs[:4], "fidelity")
    assert m["T_ms"]["0"]["marked"] == {"1": 145, "32": 430} and m["median_yank"]["0"]["marked"] == {"1": 0, "32": 0}
    reps[2] = dict(reps[2], absent=None)
    m = lab_results.lab_disconnect_metrics({"0": {"marked": reps}}, runs, "fidelity")
    assert m["absent_reads"]["0"]["marked"]["1"] is None
    with pytest.raises(AnsibleFilterError, match="5 reports for 6 yanks"):
        lab_results.lab_disconnect_metrics({"0": {"marked": reps[:5]}}, runs, "fidelity")


def test_scenario_list_may_be_a_comma_string():
    assert profile(lab_scenarios="smoke, storm")["lab_scenarios"] == ["smoke", "storm"]


def test_step_reports_fail_on_a_failed_or_skipped_step():
    ok = {"rc": 0, "stdout": '{"ok": true, "checks": []}'}
    bad = {"rc": 1, "stdout": '{"ok": false, "checks": [{"name": "x", "ok": false, "detail": "boom"}]}'}
    assert lab_scenarios.lab_steps_report([ok, ok], ["a", "b"])["ok"]
    r = lab_scenarios.lab_steps_report([ok, bad], ["a", "b"])
    assert not r["ok"] and "x: boom" in r["findings"][0]["context"]
    r = lab_scenarios.lab_steps_report([ok, {"skipped": True}], ["a", "b"])
    assert not r["ok"] and "not run" in r["findings"][0]["line"]


def test_probe_without_json_is_a_failed_report():
    r = lab_results.lab_probe_report("Segmentation fault", 139, "")
    assert r["ok"] is False and r["findings"][0]["kind"] == "probe-error"


def test_a_failed_report_names_what_failed():
    """rerun1's smoke failed on a check with no finding; a failed report now
    carries its failed checks as findings, and one with neither says so.
    A report with findings of its own keeps exactly those."""
    checks = [{"name": "slots", "ok": True}, {"name": "drive-slot-1", "ok": False, "detail": "namespace none"}]
    r = lab_results.lab_probe_report(json.dumps({"ok": False, "checks": checks, "findings": []}), 1)
    assert r["findings"] == [{"kind": "check", "line": "drive-slot-1: namespace none", "context": []}]
    r = lab_results.lab_probe_report(json.dumps({"ok": False, "checks": checks[:1]}), 1, "no slots")
    assert r["findings"][0]["kind"] == "probe-error" and "without a failed check" in r["findings"][0]["line"]
    own = [{"kind": "warning", "line": "WARNING: x", "context": []}]
    r = lab_results.lab_probe_report(json.dumps({"ok": False, "checks": checks, "findings": own}), 1)
    assert r["findings"] == own
    r = lab_results.lab_probe_report(json.dumps({"ok": True, "checks": checks[:1], "findings": []}), 0)
    assert r["ok"] and r["findings"] == []


def test_expected_failures_mark_only_fully_matched_records():
    rec = {"name": "storm", "status": "fail",
           "findings": [{"kind": "pciehp-state", "line": "pcieport: Already disabled"}]}
    exp = [{"scenario": "storm", "kind": "pciehp-state", "match": "^pcieport: Already disabled$", "scope": "s",
            "reason": "known race"}]
    (r,) = lab_results.lab_apply_expected([rec], exp)
    assert r["status"] == "xfail" and r["expected_failure"] == ["known race"]
    rec2 = dict(rec, findings=rec["findings"] + [{"kind": "bug", "line": "BUG: kernel NULL pointer"}])
    (r,) = lab_results.lab_apply_expected([rec2], exp)
    assert r["status"] == "fail"


def test_an_expected_failure_matches_its_kind_only():
    """The same words in a finding of another kind (a failed step quoting the
    line, a kernel warning) are not the known failure."""
    exp = [{"scenario": "storm", "kind": "pciehp-state", "match": "^pcieport: Already disabled$", "scope": "s",
            "reason": "known race"}]
    for kind in ("step", "warning", None):
        rec = {"name": "storm", "status": "fail", "findings": [{"kind": kind, "line": "pcieport: Already disabled"}]}
        assert lab_results.lab_apply_expected([rec], exp)[0]["status"] == "fail", kind
    with pytest.raises(AnsibleFilterError, match="needs 'scenario', 'kind'"):
        lab_results.lab_apply_expected([rec], [{"scenario": "storm", "match": "x", "reason": "r"}])


def test_the_debug_variant_expects_what_patched_expects():
    """The debug kernel is the patched tree with checks turned on:
    kernel/expected-failures/debug.yml is patched.yml (a symlink), so the two
    never drift apart; a failure only the checks find is a new failure."""
    import yaml
    debug = REPO / "kernel/expected-failures/debug.yml"
    assert debug.is_symlink() and debug.resolve() == (REPO / "kernel/expected-failures/patched.yml").resolve()
    patched = yaml.safe_load(debug.read_text()) or []
    rec = {"name": "jbof-yank", "variant": "debug", "status": "fail",
           "findings": [{"kind": "pciehp-state", "line": "pcieport 0000:05:01.0: pciehp: Timeout on hotplug "
                                                          "command 0x0000 (issued 1016 msec ago)"}]}
    stock = lab_judge.load_expected(REPO / "kernel/expected-failures", 'stock')
    (r,) = lab_results.lab_apply_expected([rec], {"debug": patched, "stock": stock})
    assert r["status"] == "fail", "stock's known failure is no known failure of the patched tree"


def test_every_expected_failure_names_a_kind_and_jbof_concurrent_only_its_teardown_commands():
    import yaml
    for variant in ("stock", "patched", "distro", "debug"):
        for e in lab_judge.load_expected(REPO / "kernel/expected-failures", variant) or []:
            assert e.get("kind") and e.get("match") and e.get("reason"), (variant, e)
    stock = lab_judge.load_expected(REPO / "kernel/expected-failures", 'stock')
    (conc,) = [e for e in stock if e["scenario"] == "jbof-concurrent"]
    line = "pcieport 0000:05:01.0: pciehp: Timeout on hotplug command 0x{} (issued 1016 msec ago)"
    rec = {"name": "jbof-concurrent", "status": "fail", "findings": [{"kind": "pciehp-state", "line": ""}]}
    for cmd, status in (("0000", "xfail"), ("0400", "xfail"), ("0300", "xfail"), ("1431", "fail"), ("07c0", "fail")):
        rec["findings"][0]["line"] = line.format(cmd)
        assert lab_results.lab_apply_expected([rec], [conc])[0]["status"] == status, cmd


def test_scaling_ratio_is_relative_to_one_drive():
    reps = [{"steps": {"collect": {"last_gone_ms": v}}} for v in (100.0, 150.0, 400.0)]
    m = lab_results.lab_scaling_metrics(reps, [1, 2, 4])
    assert m["T_over_T1"] == {"1": 1.0, "2": 1.5, "4": 4.0}


def test_aer_metrics_group_by_error_and_count_fio_outcomes():
    sys.path.insert(0, str(REPO / "lab/plugins/filter"))
    import lab_scenarios

    def rep(error, ok, end, outcome, result="recovered", resets=0):
        aer = {"recovery_begin_ms": 1.0, "recovery_end_ms": end, "slot_reset_ms": 2.0 if resets else None,
               "result": result, "slot_resets": resets}
        return {"error": error, "ok": ok, "findings": [],
                "steps": {"collect": {"aer": aer, "slots": [{"slot": "1", "fio_outcome": outcome}]}}}
    m = lab_scenarios.lab_aer_metrics([rep("COMP_TIME", True, 10.0, "went-on"),
                                       rep("SDN", True, 300.0, "went-on", resets=1),
                                       rep("COMP_TIME", False, None, "stalled", result=None)])["errors"]
    assert m["COMP_TIME"]["runs"] == 2 and m["COMP_TIME"]["failures"] == 1
    assert m["COMP_TIME"]["recovery_end_ms"] == {"p50": 10.0, "max": 10.0, "n": 1}
    assert m["COMP_TIME"]["fio_outcomes"] == {"went-on": 1, "stalled": 1}
    assert m["SDN"]["slot_resets"] == [1] and m["SDN"]["slot_reset_ms"]["n"] == 1


def test_read_json_gives_none_for_missing_or_odd_files(tmp_path):
    from lab_results import lab_read_json
    good = tmp_path / "memory.json"
    good.write_text('{"vm": "v", "rss_max_kib": 123}')
    (tmp_path / "list.json").write_text("[1]")
    assert lab_read_json(str(good)) == {"vm": "v", "rss_max_kib": 123}
    assert lab_read_json(str(tmp_path / "list.json")) is None
    assert lab_read_json(str(tmp_path / "missing.json")) is None


def test_disconnect_judge_counts_hung_tasks_of_unmarked_passes_only():
    import json
    from lab_results import lab_disconnect_judge
    from lab_scenarios import lab_steps_report
    hung = {"kind": "hung-task", "line": "INFO: task irq/24-pciehp:44 blocked for more than 10 seconds."}

    def collect(*kernel):
        # the collect step as lab_steps_report records it: failed on the kernel log alone
        out = {"checks": [{"name": "kernel-log-clean", "ok": False, "detail": "findings"}], "findings": list(kernel)}
        return lab_steps_report([{"rc": 1, "stdout": json.dumps(out)}], ["collect"])
    ok = {"ok": True, "findings": []}
    slow = collect(hung, hung)
    bug = collect(hung, {"kind": "bug", "line": "BUG: kernel NULL pointer"})
    j = lab_disconnect_judge({"50000": {"marked": [ok, ok], "unmarked": [ok, slow]}}, [1, 32])
    assert [r["ok"] for r in j["reports"]] == [True, True, True, True]
    assert j["unmarked_hung_tasks"] == {"50000": {"1": 0, "32": 2}}
    # the same symptom in a marked pass fails; anything else in an unmarked one too
    j = lab_disconnect_judge({"50000": {"marked": [slow], "unmarked": [bug]}}, [32])
    assert [r["ok"] for r in j["reports"]] == [False, False]
    assert [f["kind"] for f in j["reports"][1]["findings"]] == ["bug"]


def test_disconnect_judge_fails_a_hung_task_that_is_not_a_pciehp_irq_thread():
    """Only the pciehp IRQ threads waiting on the rescan lock are the
    measured symptom: "task fio:812 blocked" is a finding."""
    import json
    from lab_results import lab_disconnect_judge
    from lab_scenarios import lab_steps_report
    fio = {"kind": "hung-task", "line": "INFO: task fio:812 blocked for more than 10 seconds."}
    irq = {"kind": "hung-task", "line": "INFO: task irq/24-pciehp:44 blocked for more than 10 seconds."}
    out = {"checks": [{"name": "kernel-log-clean", "ok": False, "detail": "findings"}], "findings": [irq, fio]}
    rep = lab_steps_report([{"rc": 1, "stdout": json.dumps(out)}], ["collect"])
    j = lab_disconnect_judge({"50000": {"unmarked": [rep]}}, [32])
    assert not j["reports"][0]["ok"]
    assert fio in j["reports"][0]["findings"] and irq not in j["reports"][0]["findings"]
    assert j["unmarked_hung_tasks"] == {"50000": {"32": 1}}


def _bd_report(*slots, **top):
    """A bulk removal's report whose collect step has these yanked slots'
    breakdowns (None: a slot without one) and top-level fields."""
    recs = [{"slot": str(i + 1), "expected_gone": True, **({"breakdown": b} if b is not None else {})}
            for i, b in enumerate(slots)]
    recs.append({"slot": "99", "expected_gone": False, "breakdown": _bd(999, 999, 999)})  # a bystander: left out
    return {"ok": True, "steps": {"collect": {"slots": recs, **top}}}


def _bd(wait, held, unbind, in_lock=True, thread=None, pid=None, rcu=(1, 6.0), cpu=3.0):
    waits = {fn: {"n": 0, "ms": 0.0} for fn in lab_results.BREAKDOWN_WAITS}
    waits["synchronize_rcu"] = {"n": rcu[0], "ms": rcu[1]}
    return {"thread": thread, "pid": pid, "lock_wait_ms": wait, "lock_held_ms": held, "unbind_ms": unbind,
            "unbind_in_lock": in_lock, "structural_ms": held - unbind if in_lock else held, "waits": waits,
            "cpu_ms": cpu}


def test_breakdown_metrics_median_max_and_lock_wait_sum():
    rep = _bd_report(_bd(0.5, 20.0, 15.0, thread="irq/24-pciehp", pid=1),
                     _bd(20.0, 21.0, 16.0, thread="irq/25-pciehp", pid=2),
                     _bd(41.0, 22.0, 17.0, thread="irq/26-pciehp", pid=3, rcu=(2, 9.0)),
                     _bd(62.0, 23.0, 14.0, in_lock=False, thread="irq/27-pciehp", pid=4),
                     teardown_cpu_ms=12.0, cpu_floor_ms=6.0, ncpus=2, kprobe_missed=0)
    m = lab_results.lab_breakdown_metrics(rep)
    assert m["slots"] == 4 and m["with_breakdown"] == 4
    assert m["lock_wait_ms"] == {"median": 30.5, "max": 62.0, "n": 4, "sum": 123.5}
    assert m["lock_held_ms"] == {"median": 21.5, "max": 23.0, "n": 4}
    assert m["unbind_ms"] == {"median": 15.5, "max": 17.0, "n": 4}
    assert m["structural_ms"]["max"] == 23.0    # the unbind outside the lock: all of the hold is structural
    assert m["unbind_in_lock"] == {"inside": 3, "outside": 1}
    assert m["waits"]["synchronize_rcu"] == {"median": 6.0, "max": 9.0, "n": 4, "calls": 5}
    assert m["waits"]["free_irq"] == {"median": 0.0, "max": 0.0, "n": 4, "calls": 0}
    assert m["cpu_ms"] == {"median": 3.0, "max": 3.0, "n": 4}
    assert (m["teardown_cpu_ms"], m["cpu_floor_ms"], m["ncpus"], m["kprobe_missed"]) == (12.0, 6.0, 2, 0)


def test_breakdown_metrics_count_a_shared_thread_once():
    """A JBOF's drives torn down by their root port's one IRQ thread: the
    thread's lock wait and calls count once in the sums."""
    shared = dict(thread="irq/30-pciehp", pid=7)
    m = lab_results.lab_breakdown_metrics(_bd_report(_bd(5.0, 30.0, 5.0, **shared), _bd(5.0, 30.0, 6.0, **shared)))
    assert m["lock_wait_ms"]["sum"] == 5.0 and m["lock_wait_ms"]["n"] == 2
    assert m["waits"]["synchronize_rcu"]["calls"] == 1


def test_breakdown_metrics_missing_breakdown_gives_nulls_not_zeros():
    """No breakdown (a labprobe without it, a collect that failed), or a
    probe the kernel did not take: null, never 0; nothing measured is no
    time spent."""
    m = lab_results.lab_breakdown_metrics(_bd_report(None, None))
    assert m["slots"] == 2 and m["with_breakdown"] == 0
    for part in lab_results.BREAKDOWN_PARTS:
        assert m[part]["median"] is None and m[part]["max"] is None and m[part]["n"] == 0, part
    assert m["lock_wait_ms"]["sum"] is None and m["unbind_in_lock"] is None
    assert all(w == {"median": None, "max": None, "n": 0, "calls": None} for w in m["waits"].values())
    assert m["teardown_cpu_ms"] is None and m["cpu_floor_ms"] is None
    # a failed iteration without a collect step at all
    assert lab_results.lab_breakdown_metrics({"ok": False, "steps": {}})["unbind_ms"]["max"] is None
    # lock probes not placed: the lock parts null, the unbind still counted
    b = _bd(0, 0, 15.0)
    b.update(lock_wait_ms=None, lock_held_ms=None, structural_ms=None, unbind_in_lock=None)
    b["waits"]["del_gendisk"] = None
    m = lab_results.lab_breakdown_metrics(_bd_report(b))
    assert m["lock_wait_ms"] == {"median": None, "max": None, "n": 0, "sum": None}
    assert m["structural_ms"]["max"] is None and m["unbind_ms"]["max"] == 15.0
    assert m["waits"]["del_gendisk"]["max"] is None and m["waits"]["del_gendisk"]["calls"] is None


def test_disconnect_metrics_put_the_breakdown_per_timeout_flag_and_size():
    rep = _bd_report(_bd(1.0, 10.0, 8.0, thread="irq/24-pciehp", pid=1), teardown_cpu_ms=4.0, cpu_floor_ms=2.0,
                     ncpus=2, last_gone_ms=30.0)
    passes = {"50000": {"marked": [rep], "unmarked": [_bd_report(None)]}}
    m = lab_results.lab_disconnect_metrics(passes, [1], "fidelity")
    assert m["breakdown"]["50000"]["marked"]["1"]["unbind_ms"]["max"] == 8.0
    assert m["breakdown"]["50000"]["marked"]["1"]["cpu_floor_ms"] == 2.0
    assert m["breakdown"]["50000"]["unmarked"]["1"]["lock_wait_ms"]["sum"] is None
    assert "lab_breakdown_metrics" in lab_results.FilterModule().filters()


def test_breakdown_says_how_far_t_is_from_each_cpu_floor():
    """T(N) against the IRQ threads' CPU floor, the teardown's (every task
    but fio and the lab's instruments) and all busy CPU time; a floor
    nobody measured is None, never 0."""
    window = {"ncpus": 2, "busy_ms": 800.0, "by_task": {"irq/N-pciehp": 450.0, "fio": 100.0, "labprobe": 20.0,
                                                        "systemd-udevd": 80.0, "systemd-journal": 150.0}}
    rep = _bd_report(_bd(1.0, 10.0, 8.0, thread="irq/24-pciehp", pid=1), teardown_cpu_ms=450.0,
                     cpu_floor_ms=225.0, ncpus=2, last_gone_ms=400.0, cpu_window=window)
    f = lab_results.lab_breakdown_metrics(rep)["floors"]
    assert (f["irq_threads_ms"], f["teardown_ms"], f["all_busy_ms"]) == (225.0, 340.0, 400.0)
    assert f["T_over"] == {"irq_threads": 1.778, "teardown": 1.176, "all_busy": 1.0}
    bare = lab_results.lab_breakdown_metrics(_bd_report(_bd(1.0, 10.0, 8.0), last_gone_ms=400.0))["floors"]
    assert bare["teardown_ms"] is None and bare["T_over"]["teardown"] is None


def test_stock_expects_free_irqs_msix_reads_and_nothing_else_of_a_removed_drive():
    """Stock's absent-read entries (fixed by 0011) take the reads that
    pci_msi_mask_irq makes of removed drives, as run lightning-ab2 recorded
    them; a read from any other function still fails."""
    import yaml
    stock = {"stock": lab_judge.load_expected(REPO / "kernel/expected-failures", 'stock')}
    ab2 = json.loads((REPO / "reference-results/lightning-ab2/summary.json").read_text())
    (rec,) = [r for r in ab2["scenarios"] if r["variant"] == "stock" and r["name"] == "disconnect-flag"]
    assert rec["status"] == "fail" and rec["findings"]
    (r,) = lab_results.lab_apply_expected([rec], stock)
    assert r["status"] == "xfail"
    for name in ("disconnect-flag", "bulk-surprise-removal"):
        for line, status in (("96 read(s) reached removed drives: pci_msi_mask_irq x96", "xfail"),
                             ("4 read(s) reached removed drives: pci_msi_mask_irq x3, nvme_reset_work x1", "fail"),
                             ("2 read(s) reached removed drives: other x2", "fail"),
                             ("reads that reached removed drives: not counted (hpslot absent printed no count)",
                              "fail")):
            bad = {"name": name, "variant": "stock", "status": "fail",
                   "findings": [{"kind": "absent-read", "line": line}]}
            assert lab_results.lab_apply_expected([bad], stock)[0]["status"] == status, (name, line)


def _window_steps(end_findings, end_rc=None, canary=None, since=12):
    start = {"rc": 0, "stdout": json.dumps({"since_seq": since, "boot_id": "b1", "ok": True})}
    out = {"findings": end_findings, "scans": 3, "unscanned_records": 40, "restarted": False,
           "ok": not end_findings}
    if canary:
        out["canary"] = canary
    rc = end_rc if end_rc is not None else (1 if end_findings else 0)
    return start, {"rc": rc, "stdout": json.dumps(out)}


def test_log_window_adds_what_only_the_close_found_and_fails_the_record():
    """The close of a scenario's kernel-log window: a finding no scan of the
    scenario reported fails it (a skipped record too); one the scenario
    already had is not counted twice; a clean close changes nothing."""
    bug = {"kind": "bug", "line": "BUG: unable to handle page fault", "time": 5.0}
    warn = {"kind": "warning", "line": "WARNING: CPU: 1 PID: 77 at core.c:1", "time": 9.0}
    rec = {"name": "storm", "status": "pass", "failures": 0, "iterations": 2, "findings": []}
    r = lab_results.lab_log_window_merge(rec, *_window_steps([]))
    assert r["status"] == "pass" and r["findings"] == []
    assert r["log_window"] == {"since_seq": 12, "scans": 3, "unscanned_records": 40, "restarted": False,
                               "lockdep": [None, None], "chained": None, "covered": None}
    r = lab_results.lab_log_window_merge(rec, *_window_steps([warn]))
    assert r["status"] == "fail" and r["failures"] == 1 and r["findings"] == [warn]
    had = dict(rec, status="fail", failures=1, findings=[bug])
    r = lab_results.lab_log_window_merge(had, *_window_steps([bug, warn]))
    assert r["findings"] == [bug, warn] and r["failures"] == 1
    r = lab_results.lab_log_window_merge(dict(rec, status="skip"), *_window_steps([warn]))
    assert r["status"] == "fail"


def _lockdep_window(start_state, end_state, end_findings=()):
    start, end = _window_steps(list(end_findings))
    st, en = json.loads(start["stdout"]), json.loads(end["stdout"])
    st["lockdep"], en["lockdep"] = start_state, end_state
    return dict(start, stdout=json.dumps(st)), dict(end, stdout=json.dumps(en))


def test_a_window_lockdep_was_off_in_fails_its_record():
    """On a lockdep kernel a scenario whose window lockdep was off in
    checked no locking: off at the start, or switched off inside the window
    with no kernel report to explain it, is a finding (lockdep-off); off
    after lockdep's own report is that report alone; a kernel without
    lockdep (null) or a window it stayed on in is clean."""
    rec = {"name": "storm", "status": "pass", "failures": 0, "iterations": 1, "findings": []}
    for states in ((None, None), ("on", "on")):
        r = lab_results.lab_log_window_merge(rec, *_lockdep_window(*states))
        assert r["status"] == "pass" and r["findings"] == [], states
    r = lab_results.lab_log_window_merge(rec, *_lockdep_window("off", "off"))
    assert r["status"] == "fail" and [f["kind"] for f in r["findings"]] == ["lockdep-off"]
    assert "off when the scenario started" in r["findings"][0]["line"]
    r = lab_results.lab_log_window_merge(rec, *_lockdep_window("on", "off"))
    assert r["status"] == "fail" and [f["kind"] for f in r["findings"]] == ["lockdep-off"]
    assert "switched itself off inside" in r["findings"][0]["line"]
    splat = {"kind": "lockdep", "line": "WARNING: possible circular locking dependency detected", "time": 228.2}
    r = lab_results.lab_log_window_merge(rec, *_lockdep_window("on", "off", [splat]))
    assert r["status"] == "fail" and r["findings"] == [splat]
    assert r["log_window"]["lockdep"] == ["on", "off"]


def test_log_window_that_could_not_be_read_is_no_clean_window():
    rec = {"name": "smoke", "status": "pass", "failures": 0, "findings": []}
    start, _ = _window_steps([])
    r = lab_results.lab_log_window_merge(rec, start, {"rc": 1, "stdout": "", "stderr": "agent gone"})
    assert r["status"] == "fail" and r["findings"][0]["kind"] == "probe-error"
    r = lab_results.lab_log_window_merge(rec, {"rc": 1, "stdout": "", "stderr": "no labprobe"},
                                         {"skipped": True})
    assert r["status"] == "fail" and {f["kind"] for f in r["findings"]} == {"probe-error"}
    assert "window was not opened" in r["findings"][0]["line"]
    r = lab_results.lab_log_window_merge(rec, start, {"rc": 1, "stdout": json.dumps(
        {"ok": False, "findings": [], "error": "cannot read /dev/kmsg"})})
    assert r["status"] == "fail" and "cannot read /dev/kmsg" in r["findings"][0]["line"]


def test_log_window_records_the_canary():
    line = "WARNING: lab-canary storm-ab12: a marked line"
    canary = {"kind": "warning", "line": line, "time": 3.0}
    rec = {"name": "storm", "status": "pass", "failures": 0, "findings": []}
    r = lab_results.lab_log_window_merge(rec, *_window_steps([canary], canary={"fired_at": "end", "line": line}),
                                         "3")
    assert r["log_window"]["canary"] == {"fired_at": "end", "line": line, "at_scan": 3}
    assert r["status"] == "fail" and r["findings"] == [canary]


def test_methods_that_disagree_fail_the_record():
    """methods_agree false (tracepoints and kprobes more than the tolerance
    apart, or one of them missing a phase) is a finding; stock (no
    tracepoints, no methods_agree) and agreeing methods are none."""
    assert lab_results.lab_method_findings({}) == []
    assert lab_results.lab_method_findings({"methods_agree": True}) == []
    (f,) = lab_results.lab_method_findings({"methods_agree": False, "method_disagreement_ms": {
        "handled": 0.3, "disconnected": None, "isr": 40.0}})
    assert f["kind"] == "method-disagreement"
    assert "disconnected seen by one method only" in f["line"] and "handled" not in f["line"]
    (f,) = lab_results.lab_method_findings({"methods_agree": False, "method_disagreement_ms": {
        "handled": 12.5, "disconnected": 0.1}})
    assert "handled 12.5 ms apart" in f["line"]


def test_a_yank_that_left_its_device_is_a_finding():
    """hpslot remove's leftover: QEMU kept the device, hpslot deleted it
    afterwards: the step exited 0, the iteration still fails."""
    yank = {"rc": 0, "stdout": json.dumps({"command": "remove", "ok": True, "slots": [
        {"slot": "1", "result": "removed", "leftover": "none"},
        {"slot": "2", "result": "removed", "leftover": "deleted"}]})}
    r = lab_scenarios.lab_steps_report([yank], ["yank"])
    assert not r["ok"] and [f["kind"] for f in r["findings"]] == ["leftover"]
    assert "slot 2" in r["findings"][0]["line"]
    clean = {"rc": 0, "stdout": json.dumps({"ok": True, "slots": [{"slot": "1", "leftover": "none"}]})}
    assert lab_scenarios.lab_steps_report([clean], ["yank"])["ok"]


# perf report --stdio --children --sort comm,sym -g none -t "|" of a yank:
# two pciehp IRQ threads, udev and the idle task (made-up numbers, perf's layout)
PERF_REPORT = """# To display the perf.data header info, please use --header/--header-only options.
#
# Total Lost Samples: 0
#
# Samples: 1K of event 'cpu-clock'
# Event count (approx.): 800000000
#
# Children|Self|Command|Symbol
#
 30.00% | 0.00%  |irq/24-pciehp  |[k] irq_thread_fn
 20.00% | 0.00%  |irq/25-pciehp  |[k] irq_thread_fn
 25.00% | 0.00%  |irq/24-pciehp  |[k] device_del
 10.00% | 10.00% |irq/24-pciehp  |[k] kernfs_remove
 20.00% | 20.00% |irq/24-pciehp  |[k] _raw_spin_unlock_irqrestore
 15.00% | 15.00% |irq/25-pciehp  |[k] kernfs_remove
 5.00%  | 5.00%  |irq/25-pciehp  |[k] memset
 10.00% | 10.00% |systemd-udevd  |[.] 0x0000000000012345
 40.00% | 40.00% |swapper        |[k] default_idle
"""


# perf 6.1's `perf report --stats`, as the guest printed it in teardown-profile3:
# only non-zero counts, so no LOST line when nothing was lost
PERF_STATS = """Aggregated stats:
           TOTAL events:      31634
            MMAP events:          1  ( 0.0%)
          SAMPLE events:      30357  (96.0%)
{lost_line}cpu-clock stats:
          SAMPLE events:      30357
"""


def _perf_step():
    import yaml
    steps = yaml.safe_load((REPO / "playbooks/scenarios/steps/bulk-surprise-removal-iteration.yml").read_text())
    return next(t for t in steps if t.get("register") == "bulk_perf_report")


def _perf_guest_text(lost=0):
    """What the guest's pipeline (the scenario's own sed and awk) makes of
    perf report's table and its --stats."""
    import subprocess
    task = _perf_step()
    script = task["ansible.builtin.command"]["argv"][2]
    sed = re.search(r'--stats \| sed -n "(.*?)";', script).group(1)
    lost_line = f"            LOST events:          {lost}  ( 0.0%)\n" if lost else ""
    stats = subprocess.run(["sed", "-n", sed], input=PERF_STATS.format(lost_line=lost_line), text=True,
                           capture_output=True, check=True).stdout
    return subprocess.run(["awk", "-F", "|", task["vars"]["bulk_perf_awk"]], input=PERF_REPORT + stats,
                          text=True, capture_output=True, check=True).stdout


def test_perf_profile_adds_up_the_pciehp_irq_threads():
    """The guest's awk (the scenario's own program) merges the IRQ threads
    by name; the filter gives each task's share and CPU time and the
    threads' functions as shares of their own samples."""
    text = _perf_guest_text()
    p = lab_results.lab_perf_profile(text, 0, 1000, 0, 32)
    assert p["error"] is None and p["samples"] == 1000 and p["sampled_ms"] == 800.0
    assert p["lost"] == {"lost": 0, "lost_samples": 0}
    irq = p["irq_thread"]
    assert irq["pct_of_samples"] == 50.0 and irq["cpu_ms"] == 400.0
    funcs = {f["function"]: f for f in irq["functions"]}
    assert funcs["irq_thread_fn"]["children_pct"] == 100.0
    assert funcs["kernfs_remove"] == {"function": "kernfs_remove", "children_pct": 50.0, "self_pct": 50.0}
    assert funcs["device_del"]["children_pct"] == 50.0
    assert p["by_task"]["swapper"] == {"pct": 40.0, "cpu_ms": 320.0}
    assert p["by_task"]["systemd-udevd"]["pct"] == 10.0


NO_IRQ_THREAD = "# Samples: 10 of event 'cpu-clock'\n# Event count (approx.): 80000000\n40.0|40.0|swapper|[k] default_idle\n"


def test_perf_profile_that_lost_records_is_an_error():
    """teardown-profile2: perf fell behind while the drives tore down and
    its profile had not one IRQ-thread sample; records lost, even with the
    IRQ threads present, make the profile an error, not a result."""
    p = lab_results.lab_perf_profile(_perf_guest_text(lost=7), 0, 1000, 0, 32)
    assert p["error"] and "lost 7" in p["error"] and p["irq_thread"] is None, p


@pytest.mark.parametrize("text, rc", [("", 0), ("# Samples: 0 of event 'cpu-clock'\n", 0), (PERF_REPORT, 1),
                                      ("garbage|\n", 0), (NO_IRQ_THREAD, 0),
                                      (PERF_REPORT, 0)])  # no --stats: loss unknown
def test_perf_profile_without_samples_is_an_error(text, rc):
    p = lab_results.lab_perf_profile(text, rc, 1000, 0, 32)
    assert p["error"] and p["irq_thread"] is None


def test_stock_dpc_recovery_reads_are_expected_only_with_dpc():
    """Run dpc-ab2 (reference-results): stock's dpc-surprise-down and
    bulk-surprise-removal on DPC root ports fail on error recovery and its
    reads of removed drives, all known (xfail); the same reads in a run
    without lab_dpc, or a read from another function, still fail."""
    import yaml
    stock = {"stock": lab_judge.load_expected(REPO / "kernel/expected-failures", 'stock')}
    run = json.loads((REPO / "reference-results/dpc-ab2/summary.json").read_text())
    recs = [r for r in run["scenarios"] if r["variant"] == "stock" and r["status"] == "fail"]
    assert sorted(r["name"] for r in recs) == ["bulk-surprise-removal", "dpc-surprise-down"]
    assert [r["status"] for r in lab_results.lab_apply_expected(recs, stock, run["profile"])] == ["xfail", "xfail"]
    (bulk,) = [r for r in recs if r["name"] == "bulk-surprise-removal"]
    no_dpc = dict(run["profile"], lab_dpc=False)
    assert lab_results.lab_apply_expected([bulk], stock, no_dpc)[0]["status"] == "fail"
    other = dict(bulk, findings=[dict(bulk["findings"][0],
                                      line="3 read(s) reached removed drives: pci_conf1_read x2, nvme_reset_work x1")])
    assert lab_results.lab_apply_expected([other], stock, run["profile"])[0]["status"] == "fail"
    patched = [r for r in run["scenarios"] if r["variant"] == "patched"]
    assert [r["status"] for r in patched] == ["pass", "pass", "pass"]


def test_teardown_profile3_is_the_filter_of_its_perf_report():
    """docs/measurements.md's IRQ-thread table (teardown-profile3) comes
    from the committed guest report through lab_perf_profile."""
    ref = REPO / "reference-results/teardown-profile3"
    p = lab_results.lab_perf_profile((ref / "perf-report.txt").read_text(), 0, 500, 0, 32)
    assert p == json.loads((ref / "teardown-profile.json").read_text())
    assert p["error"] is None and p["lost"] == {"lost": 0, "lost_samples": 0}
    funcs = {f["function"]: f["children_pct"] for f in p["irq_thread"]["functions"]}
    assert round(funcs["nvme_remove"]) == 78 and round(funcs["acpi_pci_irq_disable"]) == 15
    assert p["irq_thread"]["cpu_ms"] == 406.8


def test_distro_list_on_a_real_run_of_debians_kernel():
    """distro-series1 (profiles/series-ab.yml on Debian's own 6.1 kernel):
    distro.yml makes sleep-replacement an expected failure (fixed by
    0003-0004); aer-reset-storm's own reset taken for a removal and
    jbof-yank's hung tasks stay failures (their steps failed with them, so
    no entry swallows them), and the reads of removed drives it made
    without DPC are in no list: each a failure, as the run recorded."""
    import yaml
    distro = {"distro": lab_judge.load_expected(REPO / "kernel/expected-failures", 'distro')}
    run = json.loads((REPO / "reference-results/distro-series1/summary.json").read_text())
    recorded = {r["name"]: r["status"] for r in run["scenarios"]}
    assert recorded == {"smoke": "pass", "bulk-surprise-removal": "fail", "aer-reset-storm": "fail",
                        "jbof-yank": "fail", "sleep-replacement": "xfail"}
    again = lab_results.lab_apply_expected([dict(r, status="fail" if r["status"] == "xfail" else r["status"])
                                            for r in run["scenarios"]], distro)
    assert {r["name"]: r["status"] for r in again} == recorded


def test_accel_limits_follow_how_the_vms_ran():
    """A report states TCG's limit for a TCG run, KVM's for a KVM run, both
    for a mixed one; a VM the probe never reached counts as TCG, and a run
    without VMs claims no hardware speed."""
    f = lab_results.lab_accel_limits
    assert f(["tcg", "tcg"], "T", "K") == ["T"]
    assert f(["kvm"], "T", "K") == ["K"]
    assert f(["kvm", "tcg"], "T", "K") == ["T", "K"]
    assert f(["kvm", None], "T", "K") == ["T", "K"]
    assert f([], "T", "K") == ["T"]
