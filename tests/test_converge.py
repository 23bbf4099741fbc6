"""An interrupted run and its rerun converge: ansible-playbook killed
(SIGKILL, as a crash or a lost terminal would) while 2 VMs run their
scenarios, then the same run id again with 1 VM. The rerun removes the
domain and directory of the VM it no longer has, redefines the other from
scratch, and its results hold nothing of the dead run; the dead run's VM
watchdogs end with it."""

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import REPO, load_summary, STATE_DIR, domains, playbook, playbook_cmd, remove_domain, tagged

PREFIX = tagged("pciehp-conv-test")
RUN_ID = tagged("test-converge")


def watchdogs_of(run_id):
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "vm-watchdog" in line and f"/{run_id}/" in line]


@pytest.mark.heavy
def test_killed_run_then_rerun_converges():
    vms = [f"{PREFIX}-1", f"{PREFIX}-2"]
    for vm in vms:
        remove_domain(vm)
    cmd, env = playbook_cmd("lab_name_prefix=" + PREFIX, "lab_run_id=" + RUN_ID, "lab_vms=2", "lab_slots=2",
                            "lab_drives=1", "lab_keep_vms=true", "lab_boot_timeout=900",
                            {"lab_scenarios": ["smoke", "storm"], "lab_iterations": 3, "lab_storm_actions": 4})
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    out = []
    try:
        for line in proc.stdout:
            out.append(line)
            if re.search(r"storm on \S+: 1/3 done", line):
                os.killpg(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=60)
        text = "".join(out)
        assert proc.returncode == -signal.SIGKILL, "the first run ended before it could be killed:\n" + text[-4000:]
        assert set(vms) <= domains(), "the killed run should have left its VMs behind"
        assert not (REPO / "results" / RUN_ID / "summary.json").exists()

        r = playbook("lab_name_prefix=" + PREFIX, "lab_run_id=" + RUN_ID, "lab_vms=1", "lab_slots=2",
                     "lab_drives=1", "lab_keep_vms=false", "lab_boot_timeout=900", {"lab_scenarios": ["smoke"]})
        assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
        assert vms[1] not in domains(), "the dead run's second VM is still defined"
        assert not (STATE_DIR / "vms" / vms[1]).exists()
        run_dir = REPO / "results" / RUN_ID
        s = load_summary(run_dir / "summary.json")
        assert s["status"] == "pass" and s["vm_failures"] == []
        assert [(x["name"], x["vm"]) for x in s["scenarios"]] == [("smoke", vms[0]), ("kernel-log", vms[0])]
        # nothing of the dead run in the directory: no second VM, no storm
        assert sorted(p.name for p in run_dir.iterdir() if p.is_dir() and p.name.startswith(PREFIX)) == [vms[0]]
        assert not (run_dir / vms[0] / "watchdog.json").exists()
        # the dead run's watchdogs ended with it (they poll every 5 s)
        for _ in range(20):
            if not watchdogs_of(RUN_ID):
                break
            time.sleep(1)
        assert watchdogs_of(RUN_ID) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for vm in vms:
            remove_domain(vm)
