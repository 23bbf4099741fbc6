"""The thunderbolt firmware platform without a VM: profile validation, the
slot map's ACPI names, the SSDT compiled by iasl, the domain's -acpitable,
and the ACPI trace parser and runtime-pm judgement of lab_pm.py."""

import json
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import REPO, domain_env, run, tagged

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_pm  # noqa: E402
import lab_topology  # noqa: E402
from ansible.errors import AnsibleFilterError  # noqa: E402

BASE = {"lab_vms": 1, "lab_slots": 4, "lab_drives": 2, "lab_kernel_variant": "patched",
        "lab_scenarios": ["smoke"], "lab_iterations": 1, "lab_chassis": 1,
        "lab_slot_numbers": [], "lab_platform": "stock"}
QEMU_NS = "{http://libvirt.org/schemas/domain/qemu/1.0}"


def profile(**kw):
    return lab_topology.lab_validate_profile({**BASE, **kw}, ["smoke"])


def test_default_firmware_is_plain_and_adds_nothing():
    p = profile()
    assert p["lab_firmware"] == "plain" and p["lab_firmware_slots"] == []
    slots = lab_topology.lab_slot_map(p, 1)
    assert lab_topology.lab_acpi_ports(slots) == []


def test_thunderbolt_names_qemus_dsdt_devices():
    p = profile(lab_firmware="thunderbolt", lab_firmware_slots=[2, 3])
    ports = lab_topology.lab_acpi_ports(lab_topology.lab_slot_map(p, 1))
    assert [(x["slot"], x["address"], x["acpi_name"], x["power_resource"], x["uid"]) for x in ports] == [
        (2, "00:03.0", "S18", "PW18", 0), (3, "00:04.0", "S20", "PW20", 1)]


def test_thunderbolt_without_slots_means_every_function_0_port():
    p = profile(lab_slots=32, lab_drives=0, lab_firmware="thunderbolt")
    ports = lab_topology.lab_acpi_ports(lab_topology.lab_slot_map(p, 1))
    assert len(ports) == 29 and ports[-1]["acpi_name"] == "SF0"


@pytest.mark.parametrize("kw,needle", [
    ({"lab_firmware": "coreboot"}, "lab_firmware="),
    ({"lab_firmware_slots": [2]}, "lab_firmware=plain"),
    ({"lab_firmware": "thunderbolt", "lab_firmware_slots": [9]}, "not one of the VM's slots"),
    ({"lab_firmware": "thunderbolt", "lab_firmware_slots": [2, 2]}, "twice"),
    ({"lab_firmware": "thunderbolt", "lab_slots": 31, "lab_firmware_slots": [30]}, "not function 0"),
    ({"lab_firmware": "thunderbolt", "lab_firmware_slots": "x"}, "lab_firmware_slots"),
])
def test_bad_firmware_profiles_name_the_field(kw, needle):
    with pytest.raises(AnsibleFilterError, match=needle):
        profile(**kw)


def render_ssdt(tmp, slots):
    env = domain_env()
    asl = env.get_template("acpi/thunderbolt-port.asl.j2").render(ports=lab_topology.lab_acpi_ports(slots))
    (tmp / "ssdt.asl").write_text(asl)
    return asl


def test_ssdt_compiles_and_carries_every_object(tmp_path):
    assert shutil.which("iasl"), "iasl is missing: apt-get install acpica-tools (tests/run does)"
    slots = lab_topology.lab_slot_map(profile(lab_firmware="thunderbolt", lab_firmware_slots=[2, 3]), 1)
    render_ssdt(tmp_path, slots)
    r = run(["iasl", "-vi", "-p", str(tmp_path / "ssdt"), str(tmp_path / "ssdt.asl")])
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(["iasl", "-d", "-p", str(tmp_path / "dis"), str(tmp_path / "ssdt.aml")])
    assert r.returncode == 0, r.stdout + r.stderr
    dis = (tmp_path / "dis.dsl").read_text()
    for name in ("S18", "S20"):
        assert f"Scope (\\_SB.PCI0.{name})" in dis
    for obj in ("_PR0", "_PR3", "_PS0", "_PS3", "_PRW", "_DSW", "_S0W", "_DSD", "_ON", "_OFF", "_STA",
                "HotPlugSupportInD3", "ExternalFacingPort", "6211e2c0-58a3-4af3-90e1-927a4e0c55a4",
                "efcc06cc-73ac-4bc3-bff0-76143807c389"):
        assert obj.lower() in dis.lower(), obj


def test_domain_gets_the_ssdt_only_with_thunderbolt(tmp_path):
    env = domain_env()
    for firmware, table in (("plain", ""), ("thunderbolt", str(tmp_path / "ssdt-firmware.aml"))):
        kw = {"lab_firmware": firmware, "lab_firmware_slots": [2] if firmware != "plain" else []}
        slots = lab_topology.lab_slot_map(profile(**kw), 1)
        vm = {"name": tagged("firmware-test"), "index": 1, "run_id": "t", "variant": "patched",
              "dir": str(tmp_path), "kernel": "/k", "initrd": "", "cmdline": "x", "slots": slots,
              "memory_mib": 256, "vcpus": 1, "emulator": "/usr/bin/qemu-system-x86_64", "acpi_table": table}
        xml = env.get_template("lab-vm.xml.j2").render(vm=vm)
        (tmp_path / "d.xml").write_text(xml)
        r = run(["virt-xml-validate", str(tmp_path / "d.xml"), "domain"])
        assert r.returncode == 0, r.stdout + r.stderr
        args = [a.get("value") for a in ET.fromstring(xml).iter(QEMU_NS + "arg")]
        assert ("-acpitable" in args) == bool(table)
        if table:
            assert args[args.index("-acpitable") + 1] == "file=" + table


TRACE = """SeaBIOS (version 1.16.2-debian-1.16.2-1)
pciehp-lab-acpi 1 100 S18 _S0W
pciehp-lab-acpi 2 110 S18.PW18 _STA 1
pciehp-lab-acpi 3 120 S18.PW18 _ON
pciehp-lab-acpi 4 130 S18 _PS0
pciehp-lab-acpi 5 140 S18 _PRW
pciehp-lab-acpi 6 150 S18 _DSW 0 0 0
pciehp-lab-acpi 7 160 S20 _S0W
pciehp-lab-acpi 8 170 S20.PW20 _ON
pciehp-lab-acpi 9 180 S20 _PS0
pciehp-lab-acpi 10 190 S20 _PRW
pciehp-lab-acpi 11 200 S20 _DSW 0 0 0
pciehp-lab-acpi 12 300 S18 _S0W
pciehp-lab-acpi 13 310 S18 _PS3
pciehp-lab-acpi 14 400 S18 _PS0
pciehp-lab-acpi 15 410 S18 _PS3
pciehp-lab-acpi 16 420 S18.PW18 _OFF
pciehp-lab-acpi 17 500 S18.PW18 _ON
pciehp-lab-acpi 18 510 S18 _PS0
"""


def test_trace_parser_skips_other_writers_and_keeps_order():
    t = lab_pm.lab_acpi_trace(TRACE)
    assert len(t) == 18 and t[0]["seq"] == 1 and t[5]["args"] == ["0", "0", "0"]
    assert lab_pm.lab_trace_last_seq(t) == 18
    assert [x["seq"] for x in lab_pm.lab_trace_since(t, 16)] == [17, 18]
    assert lab_pm.lab_trace_lines(t)[2] == "3 120 S18.PW18 _ON"


def port(slot, **kw):
    base = {"slot": str(slot), "control": "auto", "autosuspend_delay_ms": "100", "runtime_status": "active",
            "power_state": "D0", "real_power_state": "D0", "d3cold_allowed": "0", "pm_cap": False,
            "below": [], "changes": [{"t_s": 0.0, "runtime_status": "active", "power_state": "D0"}]}
    return {**base, **kw}


def good_run():
    roles = lab_pm.lab_pm_roles(lab_topology.lab_slot_map(
        profile(lab_firmware="thunderbolt", lab_firmware_slots=[2, 3]), 1))
    boot = {"pcie_port_pm_force": False, "ports": [
        port(1, control="on", autosuspend_delay_ms=None, real_power_state=None, below=[{"removable": None}]),
        port(2, acpi_path="\\_SB_.PCI0.S18_", below=[{"removable": "removable"}]),
        port(3, acpi_path="\\_SB_.PCI0.S20_"), port(4, control="on")]}
    removed = {"ports": [port(1, control="on"), port(2, runtime_status="suspended", power_state="D3hot"),
                         port(3), port(4, control="on")]}
    d3cold = {"ports": [port(2, runtime_status="suspended", power_state="D3cold", real_power_state="D3cold"),
                        port(3)]}
    wake = {"touched_at_s": 5.0, "ports": [port(2, reached_after_s=5.01, changes=[
        {"t_s": 0.0, "runtime_status": "suspended", "power_state": "D3cold"},
        {"t_s": 5.01, "runtime_status": "active", "power_state": "D0"}])]}
    log = ["[1.0] pcieport 0000:00:03.0: pciehp: Slot(2): Card present",
           "[1.1] pci 0000:02:00.0: marking as untrusted"]
    pme = {"kprobe_hits": {"pme_work": 0}}
    return [roles, boot, removed, d3cold, wake, pme, {"ok": True}, lab_pm.lab_acpi_trace(TRACE),
            {"removed": 11, "d3cold": 13, "hotadd": 16, "touch": 16}, log]


def test_runtime_pm_judgement_passes_a_good_run():
    rep = lab_pm.lab_runtime_pm_report(*good_run())
    assert rep["ok"], json.dumps([c for c in rep["checks"] if not c["ok"]], indent=1)
    assert rep["woken_by"] == "config access"


@pytest.mark.parametrize("breakage,failed", [
    (lambda a: a[1]["ports"][2]["changes"].append({"t_s": 1, "runtime_status": "suspended"}), "never suspends"),
    (lambda a: a[2]["ports"][1].update(runtime_status="active"), "suspends once empty"),
    (lambda a: a[4]["ports"][0]["changes"].insert(1, {"t_s": 2.0, "runtime_status": "active"}), "nothing wakes"),
    (lambda a: a[5]["kprobe_hits"].update(pme_work=1), "nothing wakes"),
    (lambda a: a[9].append("[2] pcieport 0000:00:03.0: pciehp: Slot(2): Card not present"), "no stale event"),
    (lambda a: a[9].pop(), "untrusted"),
    (lambda a: a[7].__setitem__(slice(14, 16), []), "_PS3 then _OFF"),
])
def test_runtime_pm_judgement_fails_what_is_wrong(breakage, failed):
    args = good_run()
    breakage(args)
    rep = lab_pm.lab_runtime_pm_report(*args)
    assert not rep["ok"]
    assert any(failed in c["name"] for c in rep["checks"] if not c["ok"]), \
        [c["name"] for c in rep["checks"] if not c["ok"]]


@pytest.mark.parametrize("pme_work,woke_early,ok", [(1, True, True), (0, True, False), (1, False, False)])
def test_runtime_pm_on_a_port_with_pme_wants_the_pme_wake(pme_work, woke_early, ok):
    # fidelity (x-pm): A has a PM capability with PME; the hot-add must
    # wake it through the PME service before labprobe touches it
    args = good_run()
    for p in args[1]["ports"]:
        p["pm_cap"] = True
    args[5]["kprobe_hits"]["pme_work"] = pme_work
    if woke_early:
        args[4]["ports"][0]["changes"][1]["t_s"] = 0.4
    rep = lab_pm.lab_runtime_pm_report(*args)
    check = [c for c in rep["checks"] if "PME wakes the port" in c["name"]]
    assert len(check) == 1 and check[0]["ok"] == ok, check
    assert (rep["woken_by"] == "PME") == ok


def sleep_case(name, hotadd, calls_trace_seq, shift=0.0):
    """A case's reports; shift: how far the log's clock runs ahead of the
    ACPI Timer (0.27 s seen under TCG)."""
    before = {"ports": [port(2, runtime_status="suspended", power_state="D3cold", irq_count=3,
                             wakeup="enabled" if name == "wake" else "disabled")]}
    after_state = ("active", "D0") if hotadd else ("suspended", "D3cold")
    after = {"ports": [port(2, runtime_status=after_state[0], power_state=after_state[1], irq_count=4)]}
    log = [f"[{9.3 + shift:.3f}] labprobe: acpi-clock mark begin", f"[{9.302 + shift:.3f}] labprobe: acpi-clock mark end",
           f"[{10.0 + shift:.3f}] PM: suspend entry (s2idle)", f"[{10.1 + shift:.3f}] PM: suspend-to-idle",
           f"[{20.0 + shift:.3f}] PM: Triggering wakeup from IRQ 9",
           f"[{20.1 + shift:.3f}] PM: resume from suspend-to-idle"]
    if hotadd:
        log.append(f"[{21.0 + shift:.3f}] pcieport 0000:00:03.0: pciehp: Slot(2): Card present")
    log += [f"[{22.0 + shift:.3f}] labprobe: acpi-clock mark begin",
            f"[{22.002 + shift:.3f}] labprobe: acpi-clock mark end"]
    return {"before": before, "after": after, "view": {"ok": True}, "log": log, "wake_irq": "9\n",
            "seq": calls_trace_seq, "hotadd": hotadd}


# ticks are the ACPI Timer (100 ns): the sleeps of both cases' logs run from
# 10.1 s to 20.1 s; the runtime case (seq 20-28) is powered up at resume and
# runtime-suspended again, the wake case (29-40) goes down before and up
# after; each case's first and last _STA are the lab's clock marks
SLEEP_TRACE = """pciehp-lab-acpi 20 90000000 S18 _S0W
pciehp-lab-acpi 21 90000000 S18 _S0W
pciehp-lab-acpi 22 93010000 S18.PW18 _STA 0
pciehp-lab-acpi 23 202000000 S18.PW18 _ON
pciehp-lab-acpi 24 202000000 S18 _PS0
pciehp-lab-acpi 25 215000000 S18 _S0W
pciehp-lab-acpi 26 215000000 S18 _PS3
pciehp-lab-acpi 27 215000000 S18.PW18 _OFF
pciehp-lab-acpi 28 220010000 S18.PW18 _STA 0
pciehp-lab-acpi 29 93010000 S18.PW18 _STA 0
pciehp-lab-acpi 30 95000000 S18.PW18 _ON
pciehp-lab-acpi 31 95000000 S18 _PS0
pciehp-lab-acpi 32 95000000 S18 _S0W
pciehp-lab-acpi 33 96000000 S18 _DSW 1 0 3
pciehp-lab-acpi 34 96000000 S18 _PS3
pciehp-lab-acpi 35 96000000 S18.PW18 _OFF
pciehp-lab-acpi 36 205000000 S18.PW18 _ON
pciehp-lab-acpi 37 205000000 S18 _PS0
pciehp-lab-acpi 38 205000000 S18 _DSW 0 0 0
pciehp-lab-acpi 39 205000000 S18 _S0W
pciehp-lab-acpi 40 220010000 S18.PW18 _STA 1
"""


def sleep_args(shift=0.0):
    roles = lab_pm.lab_pm_roles(lab_topology.lab_slot_map(
        profile(lab_firmware="thunderbolt", lab_firmware_slots=[2, 3]), 1))
    cases = {"runtime": {**sleep_case("runtime", False, 19, shift), "seq_end": 28},
             "wake": {**sleep_case("wake", True, 28, shift), "seq_end": 40}}
    return roles, cases, lab_pm.lab_acpi_trace(TRACE + SLEEP_TRACE)


def test_system_sleep_judgement_passes_a_good_run():
    roles, cases, trace = sleep_args()
    rep = lab_pm.lab_system_sleep_report(roles, cases, trace)
    assert rep["ok"], [c for c in rep["checks"] if not c["ok"]]
    assert rep["cases"]["wake"]["wake_irq"] == 9


@pytest.mark.parametrize("breakage,failed", [
    (lambda c: c["wake"].update(wake_irq="24\n"), "woken by the ACPI SCI"),
    (lambda c: c["wake"]["log"].insert(4, "[15] pcieport 0000:00:03.0: pciehp: Slot(2): Link Down"),
     "nothing from the port"),
    (lambda c: c["wake"].update(log=c["wake"]["log"][:1]), "entered and left"),
    (lambda c: c["wake"].update(seq=31), "_DSW(1)"),
    (lambda c: c["wake"]["log"].__setitem__(3, "[9.5] PM: suspend-to-idle"), "while asleep"),
    (lambda c: c["wake"].update(log=[x for x in c["wake"]["log"] if "acpi-clock" not in x]), "while asleep"),
])
def test_system_sleep_judgement_fails_what_is_wrong(breakage, failed):
    roles, cases, trace = sleep_args()
    breakage(cases)
    rep = lab_pm.lab_system_sleep_report(roles, {"wake": cases["wake"]}, trace)
    assert any(failed in c["name"] for c in rep["checks"] if not c["ok"]), \
        [c["name"] for c in rep["checks"] if not c["ok"]]


def test_system_sleep_places_the_timer_on_the_log_clock():
    # the log's clock 0.27 s ahead of jiffies (seen): resume's _ON/_PS0 at
    # Timer 20.2 s are 20.47 s on the log, after the window, not in it
    roles, cases, trace = sleep_args(shift=0.27)
    rep = lab_pm.lab_system_sleep_report(roles, cases, trace)
    assert rep["ok"], [c for c in rep["checks"] if not c["ok"]]
    pre, post = rep["cases"]["wake"]["timer_to_log_clock"]
    assert abs(pre["offset_s"] - 0.27) < 0.002 and abs(post["offset_s"] - 0.27) < 0.002


def test_system_sleep_sees_a_method_in_the_middle_of_the_sleep():
    roles, cases, trace = sleep_args(shift=0.27)
    trace.append({"seq": 39, "ticks": 150000000, "object": "S18", "method": "_PS0", "args": []})
    rep = lab_pm.lab_system_sleep_report(roles, {"wake": cases["wake"]}, trace)
    bad = [c for c in rep["checks"] if not c["ok"]]
    assert [c["name"] for c in bad] == ["wake: no ACPI method of the port ran while asleep"], bad
    assert "S18 _PS0 at 15.27" in bad[0]["detail"]


def test_system_sleep_cases_see_only_their_own_calls():
    roles, cases, trace = sleep_args()
    rep = lab_pm.lab_system_sleep_report(roles, cases, trace)
    assert rep["cases"]["runtime"]["calls"] == ["_S0W", "_S0W", "PW18._ON", "_PS0", "_S0W", "_PS3", "PW18._OFF"]


def test_system_sleep_runtime_case_fails_on_a_wake_method():
    roles, cases, trace = sleep_args()
    trace.insert(20, {"seq": 21, "ticks": 90000000, "object": "S18", "method": "_DSW", "args": ["1", "0", "3"]})
    rep = lab_pm.lab_system_sleep_report(roles, {"runtime": cases["runtime"]}, trace)
    assert any("no _DSW" in c["name"] for c in rep["checks"] if not c["ok"])
