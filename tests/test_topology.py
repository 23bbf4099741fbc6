"""Domain XML of several profiles: rendered from the slot map, valid for
libvirt's schema, and accepted by QEMU (started paused, then destroyed)."""

import json
import shutil
import sys
import xml.etree.ElementTree as ET

import jinja2
import pytest

from conftest import REPO, STATE_DIR, run, tagged, virsh

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_topology  # noqa: E402

DEFAULTS = {"lab_vms": 1, "lab_slots": 16, "lab_drives": 8, "lab_kernel_variant": "patched",
            "lab_scenarios": ["smoke"], "lab_iterations": 1, "lab_chassis": 1,
            "lab_slot_numbers": [], "lab_platform": "stock"}
PROFILES = {
    "default": {},
    "one-slot": {"lab_slots": 1, "lab_drives": 1},
    "24x20": {"lab_slots": 24, "lab_drives": 20},
    "multifunction-32": {"lab_slots": 32, "lab_drives": 32},
    "multifunction-64": {"lab_slots": 64, "lab_drives": 16},
    "numbered": {"lab_slots": 3, "lab_drives": 2, "lab_chassis": 7, "lab_slot_numbers": [10, 20, 30]},
}
QEMU_NS = "{http://libvirt.org/schemas/domain/qemu/1.0}"


def render(name, overrides, tmp):
    profile = lab_topology.lab_validate_profile({**DEFAULTS, **overrides}, ["smoke"])
    slots = lab_topology.lab_slot_map(profile, 1)
    for f in ("root.qcow2", "seed.iso", "vmlinuz"):
        (tmp / f).write_bytes(b"")
    vm = {"name": tagged(f"topology-test-{name}"), "index": 1, "run_id": "test", "variant": "patched",
          "dir": str(tmp), "kernel": str(tmp / "vmlinuz"), "initrd": "", "cmdline": "root=/dev/vda",
          "slots": slots, "memory_mib": 256, "vcpus": 1, "emulator": "/usr/bin/qemu-system-x86_64"}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "domains")))
    xml = env.get_template("lab-vm.xml.j2").render(vm=vm)
    path = tmp / "domain.xml"
    path.write_text(xml)
    return path, slots


@pytest.mark.parametrize("name", PROFILES)
def test_rendered_xml_is_valid_and_consistent(name, tmp_path):
    path, slots = render(name, PROFILES[name], tmp_path)
    r = run(["virt-xml-validate", str(path), "domain"])
    assert r.returncode == 0, r.stdout + r.stderr
    root = ET.parse(path).getroot()
    assert root.get("type") == "qemu"
    ports = [c for c in root.iter("controller") if c.get("model") == "pcie-root-port"]
    assert len(ports) == len(slots)
    addrs = [(a.get("slot"), a.get("function")) for a in root.iter("address") if a.get("type") == "pci"
             and a.get("bus") == "0x00"]
    assert len(addrs) == len(set(addrs)), "two devices on one pcie.0 address"
    pairs = {(s["chassis"], s["slot"]) for s in slots}
    assert len(pairs) == len(slots), "duplicate chassis/slot"
    args = [a.get("value") for a in root.iter(QEMU_NS + "arg")]
    assert "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off" in args
    nvme = [json.loads(a) for a in args if a.startswith('{"driver":"nvme"')]
    assert len(nvme) == sum(1 for s in slots if s["drive"])
    assert {n["bus"] for n in nvme} == {s["alias"] for s in slots if s["drive"]}
    # every function>0 port sits on a device whose function 0 is multifunction
    multi = {s["bus0_device"] for s in slots if s["multifunction"]}
    assert {s["bus0_device"] for s in slots if s["bus0_function"] > 0} <= multi


@pytest.mark.parametrize("name", ["default", "multifunction-32", "numbered"])
def test_qemu_accepts_topology(name):
    """libvirt defines the domain and QEMU builds it (started paused)."""
    tmp_path = STATE_DIR / tagged("test-topology") / name
    shutil.rmtree(tmp_path, ignore_errors=True)
    tmp_path.mkdir(parents=True)
    path, slots = render(name, PROFILES[name], tmp_path)
    run(["qemu-img", "create", "-q", "-f", "qcow2", str(tmp_path / "root.qcow2"), "64M"], check=True)
    for s in slots:
        if s["drive"]:
            (tmp_path / s["drive"]["file"]).write_bytes(b"\0" * 1024 * 1024)
    # No guest runs here: drop direct kernel boot so QEMU needs no kernel file.
    xml = path.read_text()
    xml = "\n".join(line for line in xml.splitlines() if "<kernel>" not in line and "<cmdline>" not in line)
    path.write_text(xml)
    run(["chown", "-R", "libvirt-qemu:libvirt-qemu", str(tmp_path)])
    dom = tagged(f"topology-test-{name}")
    virsh("destroy", dom)
    virsh("undefine", dom)
    r = virsh("define", str(path))
    assert r.returncode == 0, r.stderr
    try:
        r = virsh("start", "--paused", dom)
        assert r.returncode == 0, r.stderr
        r = virsh("qemu-monitor-command", dom, '{"execute":"query-pci"}')
        assert r.returncode == 0, r.stderr
        bus0 = json.loads(r.stdout)["return"][0]["devices"]
        ports = [d for d in bus0 if d.get("qdev_id", "").startswith("pci.")]
        assert len(ports) == len(slots)
        for s in slots:
            r = virsh("qemu-monitor-command", dom, json.dumps(
                {"execute": "qom-get", "arguments": {"path": "/machine/peripheral/" + s["alias"], "property": "slot"}}))
            assert json.loads(r.stdout)["return"] == s["slot"]
    finally:
        virsh("destroy", dom)
        virsh("undefine", dom)
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_device_xml_for_hand_use_is_valid():
    for path in (REPO / "domains/devices").glob("*.xml"):
        r = run(["xmllint", "--noout", str(path)])
        assert r.returncode == 0, f"{path}: {r.stderr}"
