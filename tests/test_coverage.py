"""No scenario is left out of the tests: every playbooks/scenarios/*.yml runs
in the lab_scenarios list of some test run that boots a VM (CI's lab and
fidelity VMs, or a heavy run of `tests/run --all`); a scenario added without
one fails the suite."""
import re

import pytest

from conftest import REPO, header_ci_scenarios

# test files whose lab_scenarios lists are runs that boot a VM (others list
# scenarios as bad input or as filter data)
BOOTING = ["conftest.py", "test_fidelity.py", "test_jbof.py", "test_runtime_pm_vm.py", "test_converge.py",
           "test_scale.py", "test_firmware.py", "test_canary.py", "test_kernel_scenarios.py"]


def scenarios_in_tests(tests=REPO / "tests", scenarios=REPO / "playbooks/scenarios"):
    found = set()
    for name in BOOTING:
        path = tests / name
        text = path.read_text() if path.exists() else ""
        # a run's list: {"lab_scenarios": [...]}, or a module's NAME_SCENARIOS = [...] it passes
        for body in re.findall(r'(?:"lab_scenarios":\s*|^[A-Z_]*SCENARIOS\s*=\s*)\[([^\]]*)\]', text, re.M):
            found |= set(re.findall(r'"([a-z0-9-]+)"', body))
    # a header's `ci: lab_vm` puts the scenario into the lab VM's run (conftest)
    return found | set(header_ci_scenarios(scenarios=scenarios))


def uncovered(tests=REPO / "tests", scenarios=REPO / "playbooks/scenarios"):
    return sorted({p.stem for p in scenarios.glob("*.yml")} - scenarios_in_tests(tests, scenarios))


def test_every_scenario_runs_in_a_test():
    assert uncovered() == [], "in no test that boots a VM: " + ", ".join(uncovered())


def test_a_scenario_added_without_a_test_fails(tmp_path):
    """The check above on a copy of the scenarios with one copied from
    smoke under a new name: it is named as uncovered; with `ci: lab_vm` in
    its header it is covered."""
    scen = tmp_path / "scenarios"
    scen.mkdir()
    for p in (REPO / "playbooks/scenarios").glob("*.yml"):
        (scen / p.name).write_text(p.read_text())
    smoke = (REPO / "playbooks/scenarios/smoke.yml").read_text()
    (scen / "smoke-copy.yml").write_text(smoke)
    assert uncovered(scenarios=scen) == ["smoke-copy"]
    header, rest = smoke.split("\n", 1)
    (scen / "smoke-copy.yml").write_text(header + "\n#   ci: lab_vm\n" + rest)
    assert uncovered(scenarios=scen) == []


def test_a_header_ci_line_other_than_lab_vm_is_refused(tmp_path):
    """`#   ci:` takes lab_vm only (the run conftest.LAB_VM_PROFILE makes);
    any other value would put the scenario in no run, silently."""
    (tmp_path / "a.yml").write_text("# a: one\n#   ci: lab_vm\n- name: A\n")
    (tmp_path / "b.yml").write_text("# b: one\n- name: B\n#   ci: lab_vm\n")  # below the header: not read
    assert header_ci_scenarios(scenarios=tmp_path) == ["a"]
    (tmp_path / "c.yml").write_text("# c: one\n#   ci: fidelity_vm\n- name: C\n")
    with pytest.raises(ValueError, match="c.yml: ci: 'fidelity_vm', not lab_vm"):
        header_ci_scenarios(scenarios=tmp_path)
