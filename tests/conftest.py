"""Shared test helpers: the repo, running the lab's playbooks, and one
booted lab VM for the tests that need a guest (session-scoped)."""

import json
import os
import pathlib
import re
import shutil
import subprocess

import jinja2
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
URI = "qemu:///system"
# LAB_TEST_TAG lets several checkouts run the tests at once on one host:
# it goes into every domain name, run id and scratch path the tests create.
TAG = os.environ.get("LAB_TEST_TAG", "")


def tagged(name):
    return f"{name}-{TAG}" if TAG else name


TEST_PREFIX = tagged("pciehp-test")

# Tests that boot more than the shared lab_vm (several VMs, the thunderbolt
# platform, a JBOF VM, a killed run) are heavy (the fidelity VM is not: CI
# runs the lab's own QEMU at a small size): cold on
# 2 cores they would take CI past an hour. `bash tests/run --all` (LAB_TESTS=all)
# runs them; otherwise they are reported as skipped, never silently dropped.
HEAVY_FIXTURES = {"scale_run", "runtime_pm_record", "runtime_pm_fidelity_record"}


def pytest_configure(config):
    config.addinivalue_line("markers", "heavy: boots more than the shared lab VM (bash tests/run --all)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("LAB_TESTS") == "all":
        return
    skip = pytest.mark.skip(reason="heavy: boots more than the shared lab VM; run with `bash tests/run --all`")
    for item in items:
        if item.get_closest_marker("heavy") or HEAVY_FIXTURES & set(item.fixturenames):
            item.add_marker(skip)
STATE_DIR = pathlib.Path("/var/lib/pciehp-lab")


def domain_env():
    """A Jinja environment for domains/ with the filters the templates use
    under Ansible (the lab's escaping filters and to_json)."""
    import sys
    sys.path.insert(0, str(REPO / "lab/plugins/filter"))
    import lab_escape
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "domains")))
    env.filters.update(lab_escape.FilterModule().filters())
    env.filters["to_json"] = lambda value, **kw: json.dumps(value, **kw)
    return env


def run(cmd, check=False, timeout=None, **kw):
    """Runs a command in the repo; returns the CompletedProcess (text)."""
    return subprocess.run(cmd, cwd=REPO, text=True, capture_output=True,
                          check=check, timeout=timeout, **kw)


def playbook_cmd(*extra, playbook_file="lab.yml", inventories=()):
    """The ansible-playbook command line and environment of playbook()."""
    cmd = ["ansible-playbook", playbook_file]
    for inv in inventories:
        cmd += ["-i", str(inv)]
    for e in extra:
        cmd += ["-e", e if isinstance(e, str) else json.dumps(e)]
    return cmd, dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")


def playbook(*extra, playbook_file="lab.yml", timeout=5400, inventories=()):
    """Runs ansible-playbook with -e KEY=VALUE or -e JSON arguments (and
    extra -i inventories, after the repo's own)."""
    cmd, env = playbook_cmd(*extra, playbook_file=playbook_file,
                            inventories=("inventory", *inventories) if inventories else ())
    return run(cmd, timeout=timeout, env=env)


HPSLOT = str(REPO / "lab/tools/hpslot/hpslot")
LABPROBE = REPO / "lab/tools/labprobe/labprobe"
# a labprobe that abort()ed or freed garbage: SIGABRT or SIGSEGV, as
# returncode or shell status
CRASHES = {-6, -11, 134, 139}


@pytest.fixture(scope="module")
def labprobe():
    """labprobe built for this host (the guest tool's unit tests run it with
    its LABPROBE_* test hooks, never on the host's own log or tracefs)."""
    r = run(["make", "-C", "lab/tools", "labprobe/labprobe"], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return str(LABPROBE)


def hpslot(*args):
    """hpslot --json ARGS; returns (exit code, its JSON report or {}, stderr)."""
    r = run([HPSLOT, "--json", *args])
    try:
        report = json.loads(r.stdout)
    except ValueError:
        report = {}
    return r.returncode, report, r.stderr


def virsh(*args):
    return run(["virsh", "-q", "-c", URI, *args])


def domains():
    out = virsh("list", "--all", "--name").stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def remove_domain(name):
    virsh("destroy", name)
    virsh("undefine", name)
    shutil.rmtree(STATE_DIR / "vms" / name, ignore_errors=True)


class LabVM:
    """A lab VM booted by `ansible-playbook lab.yml` and left running."""

    def __init__(self, name, summary, run_dir):
        self.name = name
        self.summary = summary
        self.run_dir = run_dir

    def agent(self, command, timeout=120):
        """Runs a command in the guest through the agent; returns (rc, out, err)."""
        import base64
        import time

        req = {"execute": "guest-exec", "arguments": {
            "path": "/bin/sh", "arg": ["-c", command], "capture-output": True}}
        r = virsh("qemu-agent-command", self.name, json.dumps(req))
        assert r.returncode == 0, r.stderr
        pid = json.loads(r.stdout)["return"]["pid"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = virsh("qemu-agent-command", self.name,
                      json.dumps({"execute": "guest-exec-status", "arguments": {"pid": pid}}))
            st = json.loads(r.stdout)["return"]
            if st["exited"]:
                dec = lambda k: base64.b64decode(st.get(k, "")).decode(errors="replace")
                return st.get("exitcode", -1), dec("out-data"), dec("err-data")
            time.sleep(0.3)
        raise TimeoutError(f"guest command did not finish in {timeout} s: {command}")


SUMMARY_SCHEMA = REPO / "docs/summary.schema.json"


def load_summary(path):
    """A run's summary.json, validated against docs/summary.schema.json:
    every summary the tests produce goes through here."""
    import jsonschema

    summary = json.loads(pathlib.Path(path).read_text())
    errors = sorted(jsonschema.Draft7Validator(json.loads(SUMMARY_SCHEMA.read_text())).iter_errors(summary),
                    key=lambda e: list(e.absolute_path))
    assert not errors, f"{path} does not match {SUMMARY_SCHEMA.name}: " + "; ".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:5])
    return summary


def booted_vm(prefix, run_id, what, *extra):
    """Generator for a fixture: `ansible-playbook lab.yml` with EXTRA boots
    VM 1 of PREFIX and keeps it; yields a LabVM, removes the domain after.
    A run that fails removes it and fails the tests that need WHAT."""
    name = f"{prefix}-1"
    remove_domain(name)
    r = playbook("lab_name_prefix=" + prefix, *extra, "lab_keep_vms=true", "lab_run_id=" + run_id)
    run_dir = REPO / "results" / run_id
    if r.returncode != 0:
        remove_domain(name)
        pytest.fail(f"lab.yml did not boot {what}:\n" + r.stdout[-6000:] + r.stderr[-2000:])
    summary = load_summary(run_dir / "summary.json")
    yield LabVM(name, summary, run_dir)
    remove_domain(name)


def header_value(path, key):
    """The value of `#   KEY: VALUE` in a scenario file's header, read by
    the lab's own reader (lab_topology.scenario_header_value)."""
    import sys
    sys.path.insert(0, str(REPO / "lab/plugins/filter"))
    import lab_topology
    return lab_topology.scenario_header_value(path, key)


def header_ci_scenarios(vm="lab_vm", scenarios=REPO / "playbooks/scenarios"):
    """The scenarios whose header says `#   ci: lab_vm`: they join the
    shared lab VM's run after the ones listed below, and are judged as
    every scenario of that run is (test_lab_e2e: passed, its whole log
    window scanned; test_canary: failed by its canary alone). A new
    scenario runs in CI without a test file touched. Any other `ci:` value
    would put a scenario in no run: refused."""
    out = []
    for path in sorted(pathlib.Path(scenarios).glob("*.yml")):
        value = header_value(path, "ci")
        if value is not None and value != vm:
            raise ValueError(f"{path.name}: ci: {value!r}, not {vm}")
        if value == vm:
            out.append(path.stem)
    return out


# The shared lab VM's run (lab_vm), at small sizes; test_canary.py runs
# the same with lab_canary=true.
LAB_VM_PROFILE = ("lab_slots=6", "lab_drives=4", "lab_aer_observe=8",
                  {"lab_scenarios": ["smoke", "bulk-surprise-removal", "quick-swap", "storm", "aer-recovery",
                                     "orderly-removal", "hot-add-bulk", "bulk-scaling"] + header_ci_scenarios(),
                   "lab_quickswap_delays_ms": [2000, 0], "lab_quickswap_settle": 3,
                   "lab_storm_actions": 12, "lab_storm_max_gap_ms": 500, "lab_storm_seed": 4242})


@pytest.fixture(scope="session")
def lab_vm():
    """One booted lab VM (patched kernel, 6 slots, 4 drives), shared by the
    tests that need a guest; its run also does smoke, a bulk surprise
    removal of all 4 drives, quick-swap, storm, aer-recovery,
    orderly-removal, hot-add-bulk and bulk-scaling (1, 2 and 4 drives) at
    small sizes. Torn down at the end of the session."""
    yield from booted_vm(TEST_PREFIX, tagged("test-lab-vm"), "the test VM", *LAB_VM_PROFILE)
