"""hpslot on a booted lab VM (the session's lab_vm: 6 slots, drives in 1-4):
what QEMU does and what the guest's pciehp makes of it."""

import json
import re

from conftest import hpslot



def guest_namespaces(vm, slot):
    """nvme namespace block devices below the slot's bus, as the guest sees them."""
    rc, out, err = vm.agent(
        f"b=$(cut -d: -f2 /sys/bus/pci/slots/{slot}/address); "
        f"for c in /sys/class/nvme/nvme*; do readlink $c/device | grep -q \"0000:$b:\" && ls $c | grep -E '^nvme[0-9]+n'; done; true")
    assert rc == 0, err
    return out.split()


def kmsg_tail(vm, lines=400):
    rc, out, _ = vm.agent(f"dmesg | tail -n {lines}")
    return out


def test_surprise_remove_four_slots_then_add_them_back(lab_vm):
    vm = lab_vm
    slots = ["1", "2", "3", "4"]
    assert all(guest_namespaces(vm, s) for s in slots)
    rc, rep, err = hpslot("remove", "--surprise", "--wait-guest", "20", vm.name, *slots)
    assert rc == 0, err + json.dumps(rep)[:3000]
    assert [s["result"] for s in rep["slots"]] == ["removed"] * 4
    log = kmsg_tail(vm)
    for s in slots:
        assert re.search(rf"Slot\({s}\): Card not present", log), f"slot {s}:\n{log[-3000:]}"
        assert guest_namespaces(vm, s) == [], f"slot {s} still has a namespace"
    rc, rep, err = hpslot("add", "--wait", "30", vm.name, *slots)
    assert rc == 0, err + json.dumps(rep)[:3000]
    expect = ",".join(f"{s['slot']}={s['serial']}" for s in rep["slots"])
    rc, out, _ = vm.agent(f"labprobe drives --expect {expect} --timeout 60")
    assert rc == 0, out


def test_orderly_remove_is_deleted_and_re_added(lab_vm):
    rc, rep, err = hpslot("remove", "--orderly", "--timeout", "10", lab_vm.name, "2")
    assert rc == 0, err + json.dumps(rep)[:3000]
    assert rep["slots"][0]["result"] == "removed"
    assert guest_namespaces(lab_vm, "2") == []
    rc, rep, err = hpslot("add", "--wait", "30", lab_vm.name, "2")
    assert rc == 0, err
    rc, out, _ = lab_vm.agent(f"labprobe drives --expect 2={rep['slots'][0]['serial']} --timeout 60")
    assert rc == 0, out


def test_orderly_remove_cancelled_keeps_the_drive(lab_vm):
    before = guest_namespaces(lab_vm, "3")
    assert before
    rc, rep, err = hpslot("remove", "--orderly", "--cancel", lab_vm.name, "3")
    assert rc == 0, err + json.dumps(rep)[:3000]
    assert rep["slots"][0]["result"] == "kept"
    assert guest_namespaces(lab_vm, "3") == before
    assert re.search(r"Slot\(3\): (Button cancel|Action canceled)", kmsg_tail(lab_vm))


def test_add_into_an_occupied_slot_is_refused_and_changes_nothing(lab_vm):
    _, before, _ = hpslot("status", lab_vm.name)
    rc, rep, err = hpslot("add", lab_vm.name, "1")
    assert rc == 3, (rc, err)
    assert "occupied" in (err + json.dumps(rep)).lower() or "holds" in (err + json.dumps(rep)).lower()
    _, after, _ = hpslot("status", lab_vm.name)
    assert [s.get("drive") for s in before["slots"]] == [s.get("drive") for s in after["slots"]]


def test_no_finding_after_the_hotplug_tests(lab_vm):
    rc, out, _ = lab_vm.agent("labprobe findings")
    assert rc == 0, out
