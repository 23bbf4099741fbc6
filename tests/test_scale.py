"""Several VMs in one run, on two hypervisor entries, one of them lost.

One run of lab.yml with 3 small VMs, scenarios smoke and storm (2
iterations), over two hypervisor entries: `localhost` (qemu:///system) and
`hv-ssh`, this same machine reached the way a second host is, through Ansible
over ssh and libvirt over qemu+ssh (a private sshd on 127.0.0.1 with its own
keys; nothing of the system's ssh setup is touched). VMs 1 and 3 run on
localhost, VM 2 on hv-ssh. While VM 3 is in its storm, the test kills its
QEMU: the run must report VM 3 failed there, and VMs 1 and 2 must have their
results complete. The run's report.html is then opened in headless Chromium.
And the filters behind it, without a VM."""

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import REPO, load_summary, STATE_DIR, playbook_cmd, remove_domain, tagged

PREFIX = tagged("pciehp-scale-test")
RUN_ID = tagged("test-scale")
SSHD_DIR = STATE_DIR / tagged("test-sshd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ssh_hypervisor(tmp_path_factory):
    """A private sshd on 127.0.0.1 and an inventory that adds it as a second
    hypervisor host, hv-ssh, with a qemu+ssh libvirt URI."""
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd):
        pytest.fail("sshd is missing: tests/run installs openssh-server")
    SSHD_DIR.mkdir(parents=True, exist_ok=True)
    os.chmod(SSHD_DIR, 0o700)
    host_key, user_key = SSHD_DIR / "host_ed25519", SSHD_DIR / "id_ed25519"
    for key in (host_key, user_key):
        if not key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    shutil.copy(f"{user_key}.pub", SSHD_DIR / "authorized_keys")
    port = free_port()
    pidfile = SSHD_DIR / "sshd.pid"
    (SSHD_DIR / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {host_key}\nPidFile {pidfile}\n"
        f"AuthorizedKeysFile {SSHD_DIR}/authorized_keys\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "Subsystem sftp internal-sftp\n")
    os.makedirs("/run/sshd", exist_ok=True)
    subprocess.run([sshd, "-f", str(SSHD_DIR / "sshd_config")], check=True)
    known_hosts = SSHD_DIR / "known_hosts"
    uri = (f"qemu+ssh://root@127.0.0.1:{port}/system?keyfile={user_key}&no_tty=1"
           f"&no_verify=1&known_hosts={known_hosts}")
    inv = tmp_path_factory.mktemp("inv") / "hv-ssh.yml"
    inv.write_text(json.dumps({"all": {"children": {"hypervisors": {"hosts": {"hv-ssh": {
        "ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": port,
        "ansible_user": "root", "ansible_ssh_private_key_file": str(user_key),
        "ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no",
        "lab_libvirt_uri": uri}}}}}}))
    try:
        # the URI itself works before the lab uses it
        r = subprocess.run(["virsh", "-c", uri, "version"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, LIBVIRT_SSH_ARGS="-o StrictHostKeyChecking=no"))
        assert r.returncode == 0, r.stderr
        yield {"inventory": inv, "uri": uri}
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGTERM)


def qemu_pid(domain):
    return int(pathlib.Path(f"/run/libvirt/qemu/{domain}.pid").read_text())


@pytest.fixture(scope="module")
def scale_run(ssh_hypervisor):
    """The run, with VM 3's QEMU killed during its storm; yields (rc, output,
    summary, run_dir)."""
    vms = [f"{PREFIX}-{i}" for i in (1, 2, 3)]
    for vm in vms:
        remove_domain(vm)
    victim = vms[2]
    cmd, env = playbook_cmd(
        "lab_name_prefix=" + PREFIX, "lab_run_id=" + RUN_ID, "lab_vms=3", "lab_slots=3", "lab_drives=2",
        "lab_keep_vms=false", "lab_boot_timeout=900",
        {"lab_scenarios": ["smoke", "storm"], "lab_iterations": 2, "lab_storm_actions": 6,
         "lab_storm_max_gap_ms": 300, "lab_storm_seed": 77},
        inventories=("inventory", ssh_hypervisor["inventory"]))
    out, killed_at = [], None
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 3000
        for line in proc.stdout:
            out.append(line)
            # storm's progress line after the victim's first iteration
            if killed_at is None and re.search(rf"storm on {re.escape(victim)}: 1/2 done", line):
                os.kill(qemu_pid(victim), signal.SIGKILL)
                killed_at = time.time()
            if time.monotonic() > deadline:
                proc.kill()
                break
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for vm in vms:
            remove_domain(vm)
    text = "".join(out)
    assert killed_at, "the run never reached the victim's second storm iteration:\n" + text[-6000:]
    run_dir = REPO / "results" / RUN_ID
    summary_file = run_dir / "summary.json"
    assert summary_file.exists(), text[-8000:]
    yield proc.returncode, text, load_summary(summary_file), run_dir


def test_lost_vm_is_reported_where_it_failed_and_the_others_complete(scale_run):
    rc, text, s, run_dir = scale_run
    vm1, vm2, vm3 = (f"{PREFIX}-{i}" for i in (1, 2, 3))
    assert rc != 0, "a run with a lost VM must fail"
    assert s["status"] == "fail"
    (failure,) = s["vm_failures"]
    assert failure["vm"] == vm3 and failure["where"] == "storm iteration 2/2", failure
    assert "no longer running" in failure["reason"], failure
    assert f"FAILED VM {vm3}" in text
    # evidence kept: watchdog record, console, the kernel log from before
    assert (run_dir / vm3 / "watchdog.json").exists()
    assert (run_dir / vm3 / "console.log").stat().st_size > 0
    assert "dmesg" in (run_dir / vm3 / "kernel-log.txt").read_text()
    records = {(r["name"], r["vm"]): r for r in s["scenarios"]}
    lost = records[("storm", vm3)]
    assert lost["status"] == "fail" and lost["findings"][0]["kind"] == "vm-failed"
    assert records[("smoke", vm3)]["status"] == "pass"
    # the other VMs, one of them on the qemu+ssh host, finished everything
    for vm in (vm1, vm2):
        for name in ("smoke", "storm"):
            r = records[(name, vm)]
            assert r["status"] == "pass", json.dumps(r, indent=1)[:4000]
        assert records[("storm", vm)]["iterations"] == 2
    assert s["hypervisors"][vm2].startswith("qemu+ssh://") and s["hypervisors"][vm1] == "qemu:///system"
    # what each VM cost its host, sampled through its own URI (qemu+ssh too)
    for vm in (vm1, vm2):
        assert s["vm_memory"][vm]["rss_max_kib"] > 64 * 1024, s["vm_memory"]
    # every VM its own storm seed
    seeds = [records[("storm", vm)]["metrics"]["seed"] for vm in (vm1, vm2)]
    assert seeds == [77, 78]
    # aggregated over the VMs: 2 + 2 storm iterations, and the lost VM's 2
    # (the first passed, the second is where it was lost): 1 failed of 6
    assert lost["iterations"] == 2 and lost["failures"] == 1
    (storm,) = [g for g in s["aggregate"] if g["scenario"] == "storm"]
    assert storm["variant"] == "patched" and storm["iterations"] == 6 and storm["failures"] == 1
    assert sorted(storm["vms"]) == [vm1, vm2, vm3]


def test_progress_lines_for_builds_and_scenario_loops(scale_run):
    _, text, _, _ = scale_run
    assert re.search(r"\] kernel patched: (up to date|\d+/\S+ objects compiled)", text), text[:6000]
    assert re.search(r"\] image patched: (up to date|step \d/\d)", text), text[:6000]
    assert re.search(rf"storm on {re.escape(PREFIX)}-1: 1/2 done, \d+ s elapsed", text)


def chromium_dom(page):
    """The DOM of a page after load, from headless Chromium."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: tests/run installs it"
    profile = STATE_DIR / tagged("test-chromium")
    shutil.rmtree(profile, ignore_errors=True)
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom",
                        page.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def check_report(run_dir, plots):
    page = run_dir / "report.html"
    assert page.exists()
    for name in plots:
        for ext in ("png", "svg"):
            assert (run_dir / "plots" / f"{name}.{ext}").stat().st_size > 1000, (name, ext)
    dom = chromium_dom(page)
    body = re.search(r"<body[^>]*>", dom).group(0)
    loaded = re.search(r'data-plots-loaded="(\d+)/(\d+)"', body)
    assert loaded and loaded.group(1) == loaded.group(2) == str(len(plots)), body
    assert 'data-plots-failed="0"' in body
    assert "What the emulation cannot show" in dom and "completion timeout" in dom.lower()
    return dom


def test_report_page_renders_with_its_plots(scale_run):
    _, _, s, run_dir = scale_run
    dom = check_report(run_dir, ["rates", "phases"])
    assert "no bulk-scaling benchmark in this run" in dom
    assert f"{PREFIX}-3" in dom and "storm iteration 2/2" in dom


def test_report_of_a_bulk_run_has_the_latency_distribution(lab_vm):
    # the lab VM's run has bulk-scaling too (conftest.LAB_VM_PROFILE): its plot
    check_report(lab_vm.run_dir, ["latency", "scaling", "rates", "phases"])


# ---- the filters, without a VM -----------------------------------------------

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_results  # noqa: E402
import lab_scale  # noqa: E402
import lab_topology  # noqa: E402
from ansible.errors import AnsibleFilterError  # noqa: E402

BASE = {"lab_vms": 4, "lab_slots": 4, "lab_drives": 2, "lab_kernel_variant": "patched",
        "lab_scenarios": ["smoke"], "lab_iterations": 1, "lab_chassis": 1, "lab_slot_numbers": [],
        "lab_platform": "stock"}


def test_variants_are_assigned_round_robin_and_default_to_one():
    p = lab_topology.lab_validate_profile({**BASE, "lab_kernel_variants": ["stock", "patched"]}, ["smoke"])
    assert [lab_topology.lab_vm_variant(p, i) for i in range(1, 5)] == ["stock", "patched", "stock", "patched"]
    assert p["lab_kernel_variant"] == "stock"
    p = lab_topology.lab_validate_profile(BASE, ["smoke"])
    assert p["lab_kernel_variants"] == ["patched"] and lab_topology.lab_vm_variant(p, 3) == "patched"


@pytest.mark.parametrize("variants,needle", [(["stock", "vanilla"], "vanilla"), (["stock", "stock"], "twice"),
                                              (["stock", "patched", "distro", "stock"], "twice"),
                                              ("not-a-list-of-known", "unknown")])
def test_bad_variant_lists_are_refused(variants, needle):
    with pytest.raises(AnsibleFilterError, match=needle):
        lab_topology.lab_validate_profile({**BASE, "lab_kernel_variants": variants}, ["smoke"])
    with pytest.raises(AnsibleFilterError, match="every variant needs"):
        lab_topology.lab_validate_profile({**BASE, "lab_vms": 1, "lab_kernel_variants": ["stock", "patched"]},
                                          ["smoke"])


def rec(name, vm, variant, iterations, failures, status=None):
    return {"name": name, "vm": vm, "variant": variant, "iterations": iterations, "failures": failures,
            "status": status or ("fail" if failures else "pass"), "findings": []}


def test_aggregate_per_scenario_and_variant_over_vms():
    agg = lab_scale.lab_aggregate([rec("storm", "a", "stock", 25, 3), rec("storm", "b", "stock", 25, 0),
                                   rec("storm", "c", "patched", 25, 0), rec("bulk", "a", "stock", 10, 10)])
    assert [(g["scenario"], g["variant"], g["iterations"], g["failures"]) for g in agg] == [
        ("bulk", "stock", 10, 10), ("storm", "patched", 25, 0), ("storm", "stock", 50, 3)]
    assert agg[2]["failure_rate"] == 0.06 and agg[2]["vms"] == ["a", "b"]
    assert agg[2]["status"] == {"fail": 1, "pass": 1}


def test_a_lost_vm_fails_the_scenario_it_was_in_and_skips_the_rest():
    f = lab_scale.lab_vm_failure("vm3", "stock", "localhost", {"scenario": "storm", "iteration": 2, "of": 5},
                                 {"reason": "the domain is no longer running: shut off (crashed)"},
                                 ["x", "Kernel panic - not syncing: Fatal exception"], True)
    assert f["where"] == "storm iteration 2/5" and "panic" in f["reason"]
    recs = lab_scale.lab_vm_failure_records(f, [rec("smoke", "vm3", "stock", 1, 0)],
                                            ["smoke", "storm", "quick-swap"], 2)
    assert [(r["name"], r["status"]) for r in recs] == [("storm", "fail"), ("quick-swap", "skip")]
    assert recs[0]["findings"][0]["kind"] == "vm-failed" and "storm iteration 2/5" in recs[0]["findings"][0]["line"]


def test_a_vm_whose_lab_task_failed_is_not_called_lost_by_its_agent():
    """bs3: an undefined variable in a scenario ended the VM's run, and the
    results said its guest agent stopped answering. scenario-run.yml keeps
    the failed task's message (lab_vm_error); the watchdog's reason, when it
    has one, still comes first."""
    err = "task 'Bar-squeeze | start' failed: 'squeeze_drives' is undefined"
    f = lab_scale.lab_vm_failure("vm1", "patched", "localhost", {"scenario": "bar-squeeze"}, {}, [], False, err)
    assert f["reason"] == "a task of the lab failed: " + err
    f = lab_scale.lab_vm_failure("vm1", "patched", "localhost", {}, {}, [], False)
    assert "guest agent stopped answering" in f["reason"]
    f = lab_scale.lab_vm_failure("vm1", "patched", "localhost", {}, {"reason": "the domain is no longer running"},
                                 [], False, err)
    assert f["reason"] == "the domain is no longer running"


def test_a_lost_vm_says_what_its_console_showed():
    """A soft lockup or an RCU stall is named as such, not as a panic, and
    the status line carries the console's key lines."""
    stall = ["rcu: INFO: rcu_preempt self-detected stall on CPU", "RIP: 0010:fio_thing+0x1/0x2"]
    f = lab_scale.lab_vm_failure("vm1", "patched", "localhost", {"scenario": "aer-recovery", "iteration": 1, "of": 1},
                                 {"reason": "the guest agent did not answer for 52 s"}, ["boot"] + stall, False)
    assert f["reason"].endswith("; the console shows an RCU stall") and "panic" not in f["reason"]
    line = lab_scale.lab_format_vm_failure(f)
    assert "self-detected stall" in line and "RIP: 0010:fio_thing" in line
    f = lab_scale.lab_vm_failure("vm1", "patched", "localhost", {}, {"reason": "the domain is no longer running"},
                                 ["BUG: kernel NULL pointer dereference, address: 0000000000000008",
                                  "Kernel panic - not syncing: Fatal exception"], False)
    assert "a kernel panic" in f["reason"] and "NULL pointer" in lab_scale.lab_format_vm_failure(f)


def test_expected_failures_follow_each_records_variant():
    fail = dict(rec("storm", "a", "stock", 1, 1), findings=[{"kind": "pciehp-state", "line": "pciehp: Already disabled"}])
    expected = {"stock": [{"scenario": "storm", "kind": "pciehp-state", "match": "^pciehp: Already disabled$",
                           "scope": "any port", "reason": "known"}],
                "patched": []}
    out = lab_results.lab_apply_expected([fail, dict(fail, variant="patched")], expected)
    assert [r["status"] for r in out] == ["xfail", "fail"]


FAKE_VIRSH = r"""#!/bin/bash
# virsh for vm-watchdog: the domain runs, its agent never answers, and its
# vCPUs wait for a host CPU $STARVE_MS ms of each second since the start
for a in "$@"; do
    case $a in
    domstate) echo "running (booted)"; exit 0 ;;
    qemu-agent-command) exit 1 ;;
    destroy) touch "$FAKE_DIR/destroyed"; exit 0 ;;
    domstats)
        t=$(( $(date +%s%N) / 1000000 - $(cat "$FAKE_DIR/t0") ))
        echo "Domain: 'vm'"; echo "  vcpu.current=2"
        echo "  vcpu.0.delay=$((t * STARVE_MS * 1000))"; echo "  vcpu.1.delay=$((t * STARVE_MS * 1000))"
        exit 0 ;;
    esac
done
exit 1
"""


@pytest.mark.parametrize("starve_ms", [0, 900])
def test_watchdog_counts_a_silent_agent_less_the_time_the_host_starved_the_vm(tmp_path, starve_ms):
    """An agent silent for SILENT s marks the VM failed; seconds in which its
    vCPUs only waited for a host CPU do not count (an overloaded host is not
    a hung guest), up to 4 x SILENT."""
    (tmp_path / "bin").mkdir()
    virsh = tmp_path / "bin" / "virsh"
    virsh.write_text(FAKE_VIRSH)
    virsh.chmod(0o755)
    (tmp_path / "t0").write_text(str(time.time_ns() // 1000000))
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", FAKE_DIR=str(tmp_path),
               STARVE_MS=str(starve_ms), LAB_WATCHDOG_PERIOD="1", LAB_WATCHDOG_PING="1",
               LAB_WATCHDOG_SILENT="3")
    r = subprocess.run([str(REPO / "lab/tools/vm-watchdog"), "test:///fake", "vm", str(tmp_path / "out"),
                        str(os.getpid())], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    w = json.loads((tmp_path / "out" / "watchdog.json").read_text())
    assert (tmp_path / "destroyed").exists()
    m = re.search(r"did not answer for (\d+) s, (\d+) s of it with its vCPUs waiting", w["reason"])
    assert m, w["reason"]
    wall, starved = int(m.group(1)), int(m.group(2))
    if starve_ms:
        # 0.9 s of each second starved: the silence the guest could have
        # answered in never reaches 3 s; the hard limit (12 s) ends it
        assert starved > 0 and wall >= 12 and wall - starved < 3
    else:
        assert starved == 0 and 3 <= wall < 12
