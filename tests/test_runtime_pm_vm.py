"""runtime-pm and system-sleep on a booted VM of the thunderbolt firmware
platform (patched kernel, 2 slots: slot 1 thunderbolt with a drive, slot 2
thunderbolt and empty). The scenarios' own checks must pass, and the
records must carry what the kernel did: the ACPI calls of each step, what
woke the port, and how the ACPI Timer maps onto the kernel log's clock."""

import json

import pytest

from conftest import REPO, playbook, remove_domain, tagged

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
        summary = json.loads(summary_path.read_text())
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
