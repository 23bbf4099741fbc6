"""No scenario is left out of the tests: every playbooks/scenarios/*.yml runs
in the lab_scenarios list of some test run that boots a VM (CI's lab and
fidelity VMs, or a heavy run of `tests/run --all`). The scenarios that still
run in none are listed here with why; the list must shrink, never hide a
new scenario."""
import re

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


def test_a_header_ci_line_names_the_lab_vm():
    """`#   ci:` takes lab_vm only (the run conftest.LAB_VM_PROFILE makes);
    any other value would put the scenario in no run, silently."""
    for path in sorted((REPO / "playbooks/scenarios").glob("*.yml")):
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            m = re.match(r"#\s+ci:(.*)$", line)
            assert not m or m.group(1).strip() == "lab_vm", f"{path.name}: ci: {m.group(1).strip()!r}, not lab_vm"


def test_every_scenario_runs_in_a_test():
    scenarios = {p.stem for p in (REPO / "playbooks/scenarios").glob("*.yml")}
    uncovered = scenarios - scenarios_in_tests()
    assert uncovered == KNOWN_UNCOVERED, (
        f"in no booted test: {sorted(uncovered - KNOWN_UNCOVERED)}; "
        f"now covered, drop from KNOWN_UNCOVERED: {sorted(KNOWN_UNCOVERED - uncovered)}")
