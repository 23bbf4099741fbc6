"""runtime-pm and system-sleep on a booted VM of the thunderbolt firmware
platform (patched kernel, 2 slots: slot 1 thunderbolt with a drive, slot 2
thunderbolt and empty). The scenarios' own checks must pass, and the
records must carry what the kernel did: the ACPI calls of each step, what
woke the port, and how the ACPI Timer maps onto the kernel log's clock."""

import json

import pytest

from conftest import REPO, load_summary, playbook, remove_domain, tagged

NAME_PREFIX = tagged("pciehp-rtpm")


@pytest.fixture(scope="module")
def runtime_pm_record():
    name = f"{NAME_PREFIX}-1"
    run_id = tagged("test-runtime-pm")
    remove_domain(name)
    try:
        r = playbook("lab_name_prefix=" + NAME_PREFIX, "lab_slots=2", "lab_drives=1",
                     "lab_firmware=thunderbolt", {"lab_firmware_slots": [1, 2]},
                     {"lab_scenarios": ["runtime-pm", "system-sleep"]}, "lab_keep_vms=false",
                     "lab_run_id=" + run_id)
        summary_path = REPO / "results" / run_id / "summary.json"
        assert summary_path.exists(), r.stdout[-6000:] + r.stderr[-2000:]
        summary = load_summary(summary_path)
        records = {s["name"]: s for s in summary["scenarios"]}
        assert "runtime-pm" in records and "system-sleep" in records, r.stdout[-6000:]
        yield records, REPO / "results" / run_id
    finally:
        remove_domain(name)


def test_runtime_pm_passes(runtime_pm_record):
    rec = runtime_pm_record[0]["runtime-pm"]
    bad = [c for c in rec["metrics"].get("checks", []) if not c["ok"]]
    assert rec["status"] == "pass", json.dumps(bad or rec["findings"], indent=1)[:6000]


def test_trace_shows_d3cold_entry_and_the_wake_by_config_access(runtime_pm_record):
    records, run_dir = runtime_pm_record
    rec = records["runtime-pm"]
    m = rec["metrics"]
    d3cold = " ".join(m["acpi_trace"]["d3cold"])
    assert "S10 _PS3" in d3cold and "S10.PW10 _OFF" in d3cold, d3cold
    assert d3cold.index("S10 _PS3") < d3cold.index("S10.PW10 _OFF")
    wake = " ".join(m["acpi_trace"]["hotadd_and_touch"])
    assert wake.index("S10.PW10 _ON") < wake.index("S10 _PS0"), wake
    if m["pm_cap"].get("1") is False:
        assert m["woken_by"] == "config access"
    assert (run_dir / rec["vm"] / "ssdt-firmware.asl").exists()


def test_system_sleep_passes_with_the_port_in_d3cold(runtime_pm_record):
    rec = runtime_pm_record[0]["system-sleep"]
    bad = [c for c in rec["metrics"].get("checks", []) if not c["ok"]]
    assert rec["status"] == "pass", json.dumps(bad or rec["findings"], indent=1)[:6000]
    for name, case in rec["metrics"]["cases"].items():
        assert case["wake_irq"] == 9, (name, case)
        assert case["timer_to_log_clock"], (name, case)
    wake = rec["metrics"]["cases"]["wake"]["calls"]
    assert wake.index("_DSW 1 0 3") < wake.index("PW10._OFF") < wake.index("_DSW 0 0 0"), wake


@pytest.fixture(scope="module")
def runtime_pm_fidelity_record():
    # the same platform on the lab's QEMU: ports with a PM capability and PME
    # from D3hot and D3cold (qemu patches 0004, 0008)
    prefix = tagged("pciehp-rtpm-fid")
    run_id = tagged("test-runtime-pm-fidelity")
    remove_domain(f"{prefix}-1")
    try:
        r = playbook("lab_name_prefix=" + prefix, "lab_platform=fidelity", "lab_slots=4", "lab_drives=2",
                     "lab_firmware=thunderbolt", {"lab_firmware_slots": [2, 3]},
                     {"lab_scenarios": ["runtime-pm"]}, "lab_keep_vms=false", "lab_run_id=" + run_id)
        summary_path = REPO / "results" / run_id / "summary.json"
        assert summary_path.exists(), r.stdout[-6000:] + r.stderr[-2000:]
        records = {s["name"]: s for s in load_summary(summary_path)["scenarios"]}
        assert "runtime-pm" in records, r.stdout[-6000:]
        yield records["runtime-pm"]
    finally:
        remove_domain(f"{prefix}-1")


def test_on_the_fidelity_platform_the_hot_add_is_woken_by_pme(runtime_pm_fidelity_record):
    rec = runtime_pm_fidelity_record
    m = rec["metrics"]
    bad = [c for c in m.get("checks", []) if not c["ok"]]
    assert rec["status"] == "pass", json.dumps(bad or rec["findings"], indent=1)[:6000]
    assert m["pm_cap"] == {"1": True, "2": True, "3": True, "4": True}, m["pm_cap"]
    assert m["woken_by"] == "PME", m["woken_by"]
    assert m["pme_service_kprobe_hits"]["pme_work"] >= 1, m["pme_service_kprobe_hits"]
    d3cold = " ".join(m["acpi_trace"]["d3cold"])
    # PME enabled before the power goes: _DSW 1 (wake) then _OFF
    assert "_DSW 1" in d3cold and d3cold.index("_DSW 1") < d3cold.index("_OFF"), d3cold
