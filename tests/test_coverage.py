"""No scenario is left out of the tests: every playbooks/scenarios/*.yml runs
in the lab_scenarios list of some test run that boots a VM (CI's lab and
fidelity VMs, or a heavy run of `tests/run --all`). The scenarios that still
run in none are listed here with why; the list must shrink, never hide a
new scenario."""
import re

import pytest

from conftest import REPO, header_ci_scenarios

# test files whose lab_scenarios lists are runs that boot a VM (others list
# scenarios as bad input or as filter data)
BOOTING = ["conftest.py", "test_fidelity.py", "test_jbof.py", "test_runtime_pm_vm.py", "test_converge.py",
           "test_scale.py", "test_firmware.py", "test_canary.py"]
# in no booted test yet; the kernel evidence for patches 0003-0007 comes
# from runs of profiles/series-ab.yml and is checked without a VM in
# tests/test_kernel_scenarios.py
KNOWN_UNCOVERED = {"aer-reset-storm", "sleep-replacement"}


def scenarios_in_tests():
    found = set()
    for name in BOOTING:
        text = (REPO / "tests" / name).read_text()
        for body in re.findall(r'"lab_scenarios":\s*\[([^\]]*)\]', text):
            found |= set(re.findall(r'"([a-z0-9-]+)"', body))
    # a header's `ci: lab_vm` puts the scenario into the lab VM's run (conftest)
    return found | set(header_ci_scenarios())


def test_a_header_ci_line_other_than_lab_vm_is_refused(tmp_path):
    """`#   ci:` takes lab_vm only (the run conftest.LAB_VM_PROFILE makes);
    any other value would put the scenario in no run, silently."""
    (tmp_path / "a.yml").write_text("# a: one\n#   ci: lab_vm\n- name: A\n")
    (tmp_path / "b.yml").write_text("# b: one\n- name: B\n#   ci: lab_vm\n")  # below the header: not read
    assert header_ci_scenarios(scenarios=tmp_path) == ["a"]
    (tmp_path / "c.yml").write_text("# c: one\n#   ci: fidelity_vm\n- name: C\n")
    with pytest.raises(ValueError, match="c.yml: ci: 'fidelity_vm', not lab_vm"):
        header_ci_scenarios(scenarios=tmp_path)
