"""End to end: `ansible-playbook lab.yml` on a small profile boots a lab VM
with native pciehp slots and NVMe drives, and writes its results."""

import json
import re
import time

from conftest import REPO, STATE_DIR, run, tagged, virsh

PHASES = {"host-setup", "kernel", "image", "define", "boot-to-agent", "scenario:smoke"}


def test_summary_has_the_documented_shape(lab_vm):
    s = lab_vm.summary
    assert s["run_id"] == tagged("test-lab-vm")
    assert s["kernel"]["variant"] == "patched"
    assert re.match(r"6\.1\.\d+-lab-patched$", s["kernel"]["release"]), s["kernel"]
    assert s["profile"]["lab_slots"] == 6 and s["profile"]["lab_drives"] == 4
    assert PHASES <= set(s["phases"]), s["phases"]
    assert all(isinstance(v, (int, float)) for v in s["phases"].values())
    assert s["limits"] and any("completion timeout" in x.lower() for x in s["limits"])
    # lab_accel=auto: the host's probe decided, every VM runs what its host's probe chose
    (probe,) = s["accel_probe"].values()
    assert probe["requested"] == "auto" and probe["accel"] in ("kvm", "tcg") and probe["reason"], probe
    assert s["accel"] == {vm: probe["accel"] for vm in s["vms"]}, s["accel"]
    (smoke,) = [r for r in s["scenarios"] if r["name"] == "smoke"]
    assert set(smoke) >= {"name", "vm", "status", "iterations", "failures", "metrics", "findings"}
    assert smoke["status"] == "pass", json.dumps(smoke, indent=1)
    assert smoke["metrics"]["namespaces"] == 4 and smoke["metrics"]["slots"] == 6
    assert (lab_vm.run_dir / "junit.xml").read_text().count("<testcase") == len(s["scenarios"])
    # results/latest is the newest run's directory (the tests' later runs,
    # e.g. the fidelity VM's canary rerun, may have moved it since)
    runs = [p.parent for p in (REPO / "results").glob("*/summary.json") if not p.parent.is_symlink()]
    assert (REPO / "results/latest").resolve() == max(runs, key=lambda p: (p / "summary.json").stat().st_mtime)
    assert lab_vm.run_dir.resolve() in [p.resolve() for p in runs]


def test_guest_sees_pciehp_slots_and_drives(lab_vm):
    rc, out, err = lab_vm.agent("ls /sys/bus/pci/slots; ls /sys/bus/pci_express/drivers/pciehp; "
                                "ls /sys/class/nvme; uname -r")
    assert rc == 0, err
    assert {"1", "2", "3", "4", "5", "6"} <= set(out.split())
    assert sum(1 for w in out.split() if w.endswith(":pcie004")) == 6
    assert sum(1 for w in out.split() if re.fullmatch(r"nvme\d+", w)) == 4
    assert out.split()[-1] == lab_vm.summary["kernel"]["release"]


def test_tracing_leaves_only_the_pinned_task_name_event(lab_vm):
    """After the run's arms and collects (bulk, quick-swap, storm, aer), the
    guest keeps task-name recording pinned by one enabled event, so that
    later arms do not live-patch __schedule() again, and labprobe's own
    instance is gone."""
    rc, out, err = lab_vm.agent("ls /sys/kernel/tracing/instances; "
                                "cat /sys/kernel/tracing/instances/labprobe-pin/events/oom/mark_victim/enable")
    assert rc == 0, err
    assert out.split() == ["labprobe-pin", "1"], out


def test_unchanged_inputs_rebuild_nothing(lab_vm):
    r = run(["lab/tools/kernel-build", "--variant", "patched"])
    assert r.returncode == 0 and "up to date" in r.stderr, r.stderr
    r = run(["lab/tools/image-build", "--variant", "patched", "--kernel-dir", r.stdout.strip()])
    assert r.returncode == 0 and "up to date" in r.stderr, r.stderr


def test_virsh_attach_and_detach_device_route(lab_vm, tmp_path):
    """The README's libvirt-native hotplug route: a virtio-blk disk into a
    free root port (slot 6 here), then an orderly detach (attention button)."""
    disk = str(STATE_DIR / tagged("hotplug-disk.raw"))
    run(["truncate", "-s", "64M", disk], check=True)
    run(["chown", "libvirt-qemu:libvirt-qemu", disk], check=True)
    xml = (REPO / "domains/devices/hotplug-disk.xml").read_text().replace("bus='0x14'", "bus='0x06'")
    dev = tmp_path / "disk.xml"
    dev.write_text(xml)
    r = virsh("attach-device", lab_vm.name, str(dev), "--live")
    assert r.returncode == 0, r.stderr
    found = ""
    for _ in range(30):
        rc, found, _ = lab_vm.agent("grep -l hotplug-disk /sys/block/vd*/serial || true")
        if found.strip():
            break
        time.sleep(1)
    assert found.strip(), "the hot-added virtio disk never showed up in the guest"
    r = virsh("detach-device", lab_vm.name, str(dev), "--live")
    assert r.returncode == 0, r.stderr
    for _ in range(30):
        rc, found, _ = lab_vm.agent("grep -l hotplug-disk /sys/block/vd*/serial || true")
        if not found.strip():
            break
        time.sleep(1)
    assert not found.strip(), "the detached disk is still in the guest"
    rc, out, _ = lab_vm.agent("labprobe findings")
    assert rc == 0, out


def test_bulk_surprise_removal_measured_every_drive(lab_vm):
    """The run's bulk-surprise-removal yanked all 4 drives in one pause: the
    guest tore every slot down (traced per drive), every fio job ended with
    its I/O error, no hung task or other finding, and the re-added drives
    passed write+verify."""
    (bulk,) = [r for r in lab_vm.summary["scenarios"] if r["name"] == "bulk-surprise-removal"]
    assert bulk["status"] == "pass", json.dumps(bulk, indent=1)[:6000]
    m = bulk["metrics"]
    assert m["drives"] == 4
    for phase in ("handled", "disconnected", "unbound", "pci_removed", "blockdev_gone", "fio_error"):
        assert m[f"{phase}_ms"]["n"] == 4, (phase, m[f"{phase}_ms"])
    # causality within the guest's own clock, per drive: handled before
    # gone, and fio's I/O error after the slot's first interrupt (before
    # 7e3353d the supervisor took a close of the node for fio's end,
    # seconds before the yank: a negative fio_error is now a measurement
    # finding, tests/test_judge.py)
    assert m["handled_ms"]["max"] <= m["pci_removed_ms"]["max"]
    assert m["impossible"] == []
    samples = m["samples_ms"]
    assert len(samples["isr"]) == len(samples["fio_error"]) == 4
    for isr, fio_error in zip(samples["isr"], samples["fio_error"]):
        assert fio_error >= isr, samples
    assert m["last_gone_ms"]["n"] == 1


def test_aer_recovery_keeps_the_drive_through_both_errors(lab_vm):
    """The run's aer-recovery injected a non-fatal (COMP_TIME) and a fatal
    (SDN) error at the first drive's root port under fio: each time the AER
    service recovered, pciehp kept the slot, fio went on or failed cleanly,
    and the drive passed write+verify afterwards. The fatal one reset the
    slot (pciehp_reset_slot traced); the non-fatal one did not."""
    (aer,) = [r for r in lab_vm.summary["scenarios"] if r["name"] == "aer-recovery"]
    assert aer["status"] == "pass", json.dumps(aer, indent=1)[:6000]
    errors = aer["metrics"]["errors"]
    assert set(errors) == {"COMP_TIME", "SDN"}
    for name, m in errors.items():
        assert m["runs"] == 1 and m["failures"] == 0, (name, m)
        assert m["results"] == ["recovered"], (name, m)
        assert set(m["fio_outcomes"]) <= {"went-on", "completed", "io-error"}, (name, m)
    assert errors["SDN"]["slot_resets"][0] >= 1, errors["SDN"]
    assert errors["COMP_TIME"]["slot_resets"] == [0], errors["COMP_TIME"]


def test_every_scenario_of_the_run_passed_with_its_data(lab_vm):
    """Each scenario of the shared run (conftest.LAB_VM_PROFILE) ran, passed,
    had its whole kernel-log window scanned, and recorded what it measures."""
    from conftest import LAB_VM_PROFILE
    recs = {r["name"]: r for r in lab_vm.summary["scenarios"]}
    # and the run's own window after them (playbooks/scenarios.yml)
    assert sorted(recs) == sorted(LAB_VM_PROFILE[-1]["lab_scenarios"] + ["kernel-log"])
    for name, r in recs.items():
        assert r["status"] == "pass" and r["iterations"] >= 1, (name, r["status"], r["findings"])
        if name == "kernel-log":
            continue
        w = r["log_window"]
        assert w["since_seq"] is not None and w["restarted"] is False and w["unscanned_records"] is not None, name
        # chained: each window starts where the previous closed, the first at the boot
        assert w["covered"]["from_boot"] is (name == LAB_VM_PROFILE[-1]["lab_scenarios"][0]), (name, w)
    # every record of the VM's kernel log, from boot to the last window, in exactly one window
    cov = lab_vm.summary["log_coverage"][lab_vm.name]
    assert cov["records"] > 0 and cov["outside_windows"] == 0 and cov["overlap"] == 0, cov
    assert cov["in_windows"] == cov["records"], cov
    # bulk-scaling: T(N) of 1, 2 and 4 drives, each measured
    t = recs["bulk-scaling"]["metrics"]["T_ms"]
    assert sorted(t, key=int) == ["1", "2", "4"] and all(v and v > 0 for v in t.values()), t
    assert recs["hot-add-bulk"]["failures"] == 0 and recs["orderly-removal"]["failures"] == 0


def test_the_gate_finds_the_new_report_kinds_in_the_guests_own_log(lab_vm):
    """The kinds the gate learnt in issue 36 (sysfs-dup, oom, alloc-failure,
    unknown-trace), each written into the guest's /dev/kmsg as the kernel
    prints it, and found by labprobe findings in the guest as one finding of
    its kind (tests/test_labprobe_findings.py checks the patterns on files).
    Last of the file: it leaves those records in the VM's log (the later
    tests scan only their own windows)."""
    rc, out, _ = lab_vm.agent("labprobe findings --since-seq 999999999")
    since = json.loads(out)["kmsg_last_seq"]
    records = [
        # a stack dump no report of the gate owns: first, so that none of
        # the reports below (which own the dumps after them) takes it
        "a stray header no pattern knows",
        "CPU: 0 PID: 77 Comm: kworker/0:2 Not tainted 6.1.0-lab #1",
        "Call Trace:", " <TASK>", " dump_stack_lvl+0x44/0x5c", " </TASK>",
        "sysfs: cannot create duplicate filename '/bus/pci/devices/0000:01:00.0'",
        "CPU: 1 PID: 212 Comm: irq/24-pciehp Not tainted 6.1.0-lab #1",
        "Call Trace:", " <TASK>", " dump_stack_lvl+0x44/0x5c", " sysfs_warn_dup.cold+0x17/0x24", " </TASK>",
        "fio invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        "Out of memory: Killed process 1234 (fio) total-vm:2449380kB, anon-rss:1920492kB, file-rss:0kB, "
        "shmem-rss:0kB, UID:0 pgtables:3840kB oom_score_adj:0",
        "kworker/u8:2: page allocation failure: order:4, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), "
        "nodemask=(null),cpuset=/,mems_allowed=0",
    ]
    # one write a record, at warning level, as printk's callers
    quote = lambda r: "'" + r.replace("'", "'\\''") + "'"
    script = "".join(f"printf '%s\\n' {quote('<4>' + r)} > /dev/kmsg\n" for r in records)
    rc, _, err = lab_vm.agent(script)
    assert rc == 0, err
    rc, out, _ = lab_vm.agent(f"labprobe findings --since-seq {since}")
    kinds = [f["kind"] for f in json.loads(out)["findings"]]
    assert rc == 1 and kinds == ["unknown-trace", "sysfs-dup", "oom", "alloc-failure"], kinds
