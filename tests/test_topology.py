"""Domain XML of several profiles: rendered from the slot map, valid for
libvirt's schema, and accepted by QEMU (started paused, then destroyed)."""

import json
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import REPO, STATE_DIR, domain_env, run, tagged, virsh

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
    "jbof-2x3": {"lab_slots": 2, "lab_drives": 1, "lab_jbofs": 2, "lab_jbof_slots": 4, "lab_jbof_drives": 3},
    "jbof-lightning": {"lab_slots": 0, "lab_drives": 0, "lab_jbofs": 1, "lab_jbof_slots": 15, "lab_jbof_drives": 15},
    "jbof-multifunction": {"lab_slots": 29, "lab_drives": 2, "lab_jbofs": 2, "lab_jbof_slots": 2, "lab_jbof_drives": 2},
}
QEMU_NS = "{http://libvirt.org/schemas/domain/qemu/1.0}"


def render(name, overrides, tmp, vm_extra=None):
    profile = lab_topology.lab_validate_profile({**DEFAULTS, **overrides}, ["smoke"])
    slots = lab_topology.lab_slot_map(profile, 1)
    jbofs = lab_topology.lab_jbof_map(profile, 1)
    for f in ("root.qcow2", "seed.iso", "vmlinuz"):
        (tmp / f).write_bytes(b"")
    vm = {"name": tagged(f"topology-test-{name}"), "index": 1, "run_id": "test", "variant": "patched",
          "dir": str(tmp), "kernel": str(tmp / "vmlinuz"), "initrd": "", "cmdline": "root=/dev/vda",
          "slots": slots, "jbofs": jbofs, "memory_mib": 256, "vcpus": 1, "emulator": "/usr/bin/qemu-system-x86_64",
          **(vm_extra or {})}
    env = domain_env()
    # Ansible's bool filter, which the fidelity part of the template uses
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).strip().lower() in ("1", "true", "yes", "on")
    xml = env.get_template("lab-vm.xml.j2").render(vm=vm)
    path = tmp / "domain.xml"
    path.write_text(xml)
    return path, slots, jbofs


@pytest.mark.parametrize("name", PROFILES)
def test_rendered_xml_is_valid_and_consistent(name, tmp_path):
    path, slots, jbofs = render(name, PROFILES[name], tmp_path)
    r = run(["virt-xml-validate", str(path), "domain"])
    assert r.returncode == 0, r.stdout + r.stderr
    root = ET.parse(path).getroot()
    assert root.get("type") == "qemu"
    ports = [c for c in root.iter("controller") if c.get("model") == "pcie-root-port"]
    roots = [s for s in slots if not s["jbof"]] + [j["root"] for j in jbofs]
    assert len(ports) == len(roots)
    # every JBOF: one upstream port in its root port, a hotplug downstream port a slot
    ups = {c.get("index"): c for c in root.iter("controller") if c.get("model") == "pcie-switch-upstream-port"}
    downs = [c for c in root.iter("controller") if c.get("model") == "pcie-switch-downstream-port"]
    assert len(ups) == len(jbofs) and len(downs) == sum(len(j["slots"]) for j in jbofs)
    for j in jbofs:
        up = ups[str(j["upstream"]["index"])]
        assert int(up.find("address").get("bus"), 16) == j["root"]["index"]
        mine = [c for c in downs if int(c.find("address").get("bus"), 16) == j["upstream"]["index"]]
        assert len(mine) == len(j["slots"])
        assert all(c.find("target").get("hotplug") == "on" for c in mine)
    indices = [int(c.get("index")) for c in root.iter("controller") if c.get("type") == "pci"]
    assert len(indices) == len(set(indices)) and max(indices) <= 255
    addrs = [(a.get("slot"), a.get("function")) for a in root.iter("address") if a.get("type") == "pci"
             and a.get("bus") == "0x00"]
    assert len(addrs) == len(set(addrs)), "two devices on one pcie.0 address"
    pairs = {(s["chassis"], s["slot"]) for s in roots + [d for d in slots if d["jbof"]]}
    assert len(pairs) == len(roots) + len(slots) - len([s for s in slots if not s["jbof"]]), "duplicate chassis/slot"
    numbers = [s["slot"] for s in roots + [d for d in slots if d["jbof"]]]
    assert len(numbers) == len(set(numbers)), "two slots with one physical slot number"
    args = [a.get("value") for a in root.iter(QEMU_NS + "arg")]
    assert "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off" in args
    nvme = [json.loads(a) for a in args if a.startswith('{"driver":"nvme"')]
    assert len(nvme) == sum(1 for s in slots if s["drive"])
    assert {n["bus"] for n in nvme} == {s["alias"] for s in slots if s["drive"]}
    # every function>0 port sits on a device whose function 0 is multifunction
    multi = {s["bus0_device"] for s in roots if s["multifunction"]}
    assert {s["bus0_device"] for s in roots if s["bus0_function"] > 0} <= multi


@pytest.mark.parametrize("accel", ["kvm", "tcg"])
def test_domain_type_follows_the_accel_probe(accel, tmp_path):
    """lab_accel: a VM on a host whose probe chose KVM is a kvm domain with
    the CPU model the probe booted (host-passthrough), valid for libvirt's
    schema; under TCG a qemu domain with QEMU's default CPU."""
    path, _, _ = render(f"accel-{accel}", {}, tmp_path, {"accel": accel})
    r = run(["virt-xml-validate", str(path), "domain"])
    assert r.returncode == 0, r.stdout + r.stderr
    root = ET.parse(path).getroot()
    assert root.get("type") == ("kvm" if accel == "kvm" else "qemu")
    cpu = root.find("cpu")
    assert (cpu.get("mode") if cpu is not None else None) == ("host-passthrough" if accel == "kvm" else None)


def frontend_props(root):
    """alias -> {property name: value} of each <qemu:device> override"""
    return {d.get("alias"): {p.get("name"): p.get("value") for p in d.iter(QEMU_NS + "property")}
            for d in root.iter(QEMU_NS + "device")}


@pytest.mark.parametrize("platform", ["stock", "fidelity"])
def test_fidelity_ports_keep_a_powered_off_card(platform, tmp_path):
    """Every root port and JBOF downstream port of a fidelity VM keeps its
    card when the guest powers the slot off (qemu 0010), as x-dllsc; Debian's
    QEMU has no such property, and a stock VM must not name it."""
    extra = {"platform": platform, "completion_timeout_us": 0, "attention_button": True, "dpc": False}
    path, slots, jbofs = render(f"props-{platform}", PROFILES["jbof-2x3"], tmp_path, extra)
    r = run(["virt-xml-validate", str(path), "domain"])
    assert r.returncode == 0, r.stdout + r.stderr
    props = frontend_props(ET.parse(path).getroot())
    ports = [s["alias"] for s in slots if not s["jbof"]] + [j["root"]["alias"] for j in jbofs] + \
        [s["alias"] for s in slots if s["jbof"]]
    assert set(props) == set(ports)
    assert any(s["jbof"] for s in slots)
    for alias in ports:
        if platform == "fidelity":
            assert props[alias].get("x-power-off-keeps-card") == "true", (alias, props[alias])
            assert props[alias].get("x-dllsc") == "true", (alias, props[alias])
        else:
            assert not any(p.startswith("x-") for p in props[alias]), (alias, props[alias])


@pytest.mark.parametrize("name", ["default", "multifunction-32", "numbered", "jbof-2x3", "jbof-lightning"])
def test_qemu_accepts_topology(name):
    """libvirt defines the domain and QEMU builds it (started paused)."""
    tmp_path = STATE_DIR / tagged("test-topology") / name
    shutil.rmtree(tmp_path, ignore_errors=True)
    tmp_path.mkdir(parents=True)
    path, slots, jbofs = render(name, PROFILES[name], tmp_path)
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
        assert len(ports) == len([s for s in slots if not s["jbof"]]) + len(jbofs)
        # each JBOF: its root port holds the upstream port, which holds the
        # downstream ports (QOM: nothing is numbered before the firmware runs)
        def parent(alias):
            r = virsh("qemu-monitor-command", dom, json.dumps(
                {"execute": "qom-get", "arguments": {"path": "/machine/peripheral/" + alias,
                                                     "property": "parent_bus"}}))
            return json.loads(r.stdout)["return"]
        for j in jbofs:
            root_alias, up_alias = j["root"]["alias"], j["upstream"]["alias"]
            assert parent(up_alias).endswith(f"/{root_alias}/{root_alias}")
            for s in j["slots"]:
                assert parent(s["alias"]).endswith(f"/{up_alias}/{up_alias}")
        for s in slots + [j["root"] for j in jbofs]:
            r = virsh("qemu-monitor-command", dom, json.dumps(
                {"execute": "qom-get", "arguments": {"path": "/machine/peripheral/" + s["alias"], "property": "slot"}}))
            assert json.loads(r.stdout)["return"] == s["slot"]
        for s in slots:
            if s["drive"]:
                assert parent(s["drive"]["id"]).endswith(f"/{s['alias']}/{s['alias']}")
    finally:
        virsh("destroy", dom)
        virsh("undefine", dom)
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_device_xml_for_hand_use_is_valid():
    for path in (REPO / "domains/devices").glob("*.xml"):
        r = run(["xmllint", "--noout", str(path)])
        assert r.returncode == 0, f"{path}: {r.stderr}"


def test_domain_difference_names_the_first_line_that_differs():
    """lab_rerun refuses a kept VM whose domain was defined from other XML
    (roles/vm/tasks/keep.yml): the first differing line, both sides."""
    want = "<domain>\n  <description>VM 1 of run r2</description>\n  <memory unit='MiB'>1024</memory>\n</domain>\n"
    assert lab_topology.lab_domain_difference(want, want) == ""
    # the run that defined it is no difference (series-ab3, then rerun1)
    assert lab_topology.lab_domain_difference(want, want.replace("r2", "r1")) == ""
    assert lab_topology.lab_domain_difference(want, want.replace("1024", "2048")) == \
        "line 2 (without the description): wants <memory unit='MiB'>1024</memory>, " \
        "defined with <memory unit='MiB'>2048</memory>"
    assert lab_topology.lab_domain_difference(want + "<x/>", want) == \
        "line 4 (without the description): wants <x/>, defined with nothing"
    assert "defined before lab_rerun existed" in lab_topology.lab_domain_difference(want, None)
