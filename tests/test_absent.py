"""The absent-read gate (lab/plugins/filter/lab_absent.py): the fidelity
QEMU's count of reads that reached a removed drive, named by guest kernel
function, fails a bulk removal's iteration unless it is zero. The VM side
(QEMU counting, the kernel making no such read) is in test_fidelity.py."""

import json
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "lab" / "plugins" / "filter"))

import lab_absent  # noqa: E402
import lab_results  # noqa: E402

# a System.map of a kernel linked at 0xffffffff81000000; the guest runs it
# relocated by 0x2a000000 (KASLR)
MAP = """\
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81100000 t pci_msi_mask_irq
ffffffff81100080 T pci_msi_unmask_irq
ffffffff81200000 D some_data
ffffffff81300000 T nvme_remove
ffffffff81300400 T _etext
"""
GUEST_STEXT = "ffffffffab000000"


@pytest.fixture()
def system_map(tmp_path):
    p = tmp_path / "System.map"
    p.write_text(MAP)
    return str(p)


def hpslot_absent(counts):
    """`hpslot absent --json` as the lab's hpslot prints it."""
    return json.dumps({"command": "absent", "ok": True, "slots": [
        {"slot": slot, "absent_reads": sum(c for _, c in pcs),
         "absent_read_pcs": [{"pc": pc, "count": c} for pc, c in pcs]} for slot, pcs in counts.items()]})


def test_ksym_undoes_kaslr(system_map):
    assert lab_absent.lab_ksym("0xffffffffab100010", GUEST_STEXT, system_map) == "pci_msi_mask_irq+0x10"
    assert lab_absent.lab_ksym("0xffffffffab300004", GUEST_STEXT, system_map) == "nvme_remove+0x4"


def test_ksym_leaves_what_it_cannot_name(system_map):
    # no System.map (Debian's prebuilt kernel), no _stext, not an address
    assert lab_absent.lab_ksym("0xffffffffab100010", GUEST_STEXT, "") == "0xffffffffab100010"
    assert lab_absent.lab_ksym("0xffffffffab100010", "", system_map) == "0xffffffffab100010"
    assert lab_absent.lab_ksym("0", GUEST_STEXT, system_map) == "0"
    assert lab_absent.lab_ksym("junk", GUEST_STEXT, system_map) == "junk"


def test_summary_by_slot_and_function(system_map):
    out = lab_absent.lab_absent_summary(hpslot_absent({
        1: [("0xffffffffab100010", 3)], 2: [("0xffffffffab100010", 2), ("0xffffffffab300004", 1)],
        3: []}), GUEST_STEXT, system_map)
    assert out["total"] == 6
    assert out["by_slot"] == {"1": 3, "2": 3, "3": 0}
    assert out["by_function"] == {"pci_msi_mask_irq": 5, "nvme_remove": 1}


def test_summary_of_nothing_is_none():
    # Debian's QEMU has no count: hpslot fails, its output carries no slots
    assert lab_absent.lab_absent_summary("") is None
    assert lab_absent.lab_absent_summary(json.dumps({"ok": False, "error": "x", "slots": [{"slot": 1}]})) is None


def test_gate_passes_on_zero(system_map):
    rep = lab_absent.lab_absent_judge({"ok": True, "findings": []},
                                      lab_absent.lab_absent_summary(hpslot_absent({1: [], 2: []})))
    assert rep["ok"] and rep["findings"] == [] and rep["absent"]["total"] == 0


def test_gate_fails_on_a_read(system_map):
    summary = lab_absent.lab_absent_summary(hpslot_absent({1: [("0xffffffffab100010", 3)]}), GUEST_STEXT,
                                            system_map)
    rep = lab_absent.lab_absent_judge({"ok": True, "findings": []}, summary)
    assert not rep["ok"]
    assert rep["findings"][0]["kind"] == "absent-read"
    assert rep["findings"][0]["line"] == "3 read(s) reached removed drives: pci_msi_mask_irq x3"


def test_gate_fails_without_a_count():
    rep = lab_absent.lab_absent_judge({"ok": True, "findings": []}, None)
    assert not rep["ok"] and rep["findings"][0]["kind"] == "absent-read"


def test_unmarked_pass_counts_reads_instead_of_failing(system_map):
    summary = lab_absent.lab_absent_summary(hpslot_absent({1: [("0xffffffffab100010", 3)]}), GUEST_STEXT,
                                            system_map)
    rep = lab_absent.lab_absent_judge({"ok": True, "findings": []}, summary)
    judged = lab_results.lab_disconnect_judge({"10000": {"marked": [rep], "unmarked": [rep]}}, [1])
    marked, unmarked = judged["reports"]
    assert not marked["ok"]          # a marked pass fails on it
    assert unmarked["ok"]            # an unmarked pass measures it
    # ... but not when the count is missing
    missing = lab_absent.lab_absent_judge({"ok": True, "findings": []}, None)
    judged = lab_results.lab_disconnect_judge({"10000": {"unmarked": [missing]}}, [1])
    assert not judged["reports"][0]["ok"]
