"""No input can make the lab delete, overwrite or run anything outside its
own places.

Each bad input goes to `ansible-playbook lab.yml` as a user would give it;
the run must be refused with a message naming the field, before anything is
created, and nothing outside the lab's directories may change (a victim
directory a hostile prefix points at, the results root, the VM directories,
libvirt's domains). Then the guards behind validation: the one module that
removes directories (lab_tree), the run lock of a name prefix, the domain
template's escaping and image-build's refusal to remove a tree with a mount
below it.
"""

import concurrent.futures
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import REPO, STATE_DIR, domain_env, domains, playbook, run, tagged

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_profile  # noqa: E402
import lab_topology  # noqa: E402

PREFIX = tagged("pciehp-safety")
LONG = "x" * 64

# (what is given, what the message must name). Each is refused before
# anything is created.
BAD = [
    # the inputs of the safety audit
    # the refused runs get a state directory of their own, SANDBOX/state:
    # this prefix makes the VM directory SANDBOX/state/vms/../../victim-1
    (["lab_name_prefix=../../victim"], "lab_name_prefix"),
    ([{"lab_name_prefix": "a b"}], "lab_name_prefix"),
    ([{"lab_name_prefix": "a'b"}], "lab_name_prefix"),
    (["lab_name_prefix=a/b"], "lab_name_prefix"),
    (["lab_name_prefix=.."], "lab_name_prefix"),
    ([{"lab_name_prefix": ["a"]}], "lab_name_prefix"),
    (["lab_name_prefix={{ 7*7 }}"], "Jinja"),
    (["lab_run_id=latest"], "lab_run_id=latest is reserved"),
    ([{"lab_run_id": "abc\n"}], "control character"),
    (["lab_results_root=/"], "lab_results_root=/ is a system directory"),
    (["lab_slot=8"], "did you mean lab_slots"),
    (["lab_vm_memory_mib=-5"], "lab_vm_memory_mib=-5 is out of range"),
    (["lab_vm_vcpus=abc"], "lab_vm_vcpus=abc is not a whole number"),
    (["lab_drive_size_mib=0"], "lab_drive_size_mib=0 is out of range"),
    (["lab_boot_timeout=-1"], "lab_boot_timeout=-1 is out of range"),
    (["lab_iterations=1000000000"], "lab_iterations=1000000000 is out of range"),
    (["lab_cache_dir=relcache"], "lab_cache_dir=relcache must be an absolute path"),
    (["lab_cache_dir=/"], "lab_cache_dir=/ is a system directory"),
    (["lab_keep_vms=maybe"], "lab_keep_vms=maybe must be true or false"),
    (["lab_state_dir=/tmp/a,b"], "lab_state_dir=/tmp/a,b may hold only"),
    # more of the same kinds
    (["lab_state_dir=/var/lib"], "lab_state_dir=/var/lib is a system directory"),
    (["lab_state_dir=/var/lib/pciehp-lab/../../../etc"], "is not normalised"),
    (["lab_results_root=/etc"], "lab_results_root=/etc is a system directory"),
    (["lab_results_root=results"], "must be an absolute path"),
    ([{"lab_cache_dir": "/tmp/x y"}], "lab_cache_dir='/tmp/x y' may hold only"),
    (["lab_run_id=.."], "lab_run_id"),
    (["lab_run_id=a/b"], "lab_run_id"),
    (["lab_run_id=-rf"], "lab_run_id"),
    ([{"lab_name_prefix": LONG}], "lab_name_prefix"),
    ([{"lab_profile": {}}], "lab_profile is set by the lab itself"),
    (["lab_repo_dir=/tmp"], "lab_repo_dir is set by the lab itself"),
    ([{"lab_hpslot": ["/bin/sh", "-c", "id"]}], "lab_hpslot is set by the lab itself"),
    (["lab_slots=1e3"], "lab_slots=1e3 is not a whole number"),
    ([{"lab_slots": "5 "}], "is not a whole number"),
    ([{"lab_vms": True}], "lab_vms=True is not a whole number"),
    (["lab_iterations=1.5"], "lab_iterations=1.5 is not a whole number"),
    (["lab_chassis=256"], "lab_chassis=256 is out of range"),
    (["lab_drives=1000"], "lab_drives=1000 is out of range"),
    (["lab_agent_patience=0"], "lab_agent_patience=0 is out of range"),
    ([{"lab_scenarios": []}], "lab_scenarios"),
    ([{"lab_scenarios": ["smoke; rm -rf /"]}], "unknown scenario"),
    ([{"lab_kernel_variants": ["stock", "stock"]}], "names an item twice"),
    ([{"lab_aer_errors": ["SDN; quit"]}], "lab_aer_errors[0]"),
    (["lab_debian_mirror=file:///etc"], "has scheme file"),
    ([{"lab_debian_mirror": "http://x/\ndeb"}], "control character"),
    ([{"lab_guest_cmdline": "console=ttyS0\ninit=/bin/sh"}], "control character"),
    ([{"lab_guest_cmdline_extra": "\u00e9t\u00e9"}], "printable ASCII"),
    (["lab_storm_seed=abc"], "lab_storm_seed=abc is not a whole number"),
    (["lab_quickswap_delays_ms=2000,0"], "must be a list"),
    ([{"lab_quickswap_delays_ms": [-1]}], "lab_quickswap_delays_ms[0]=-1 is out of range"),
    (["lab_completion_timeout_us=100"], "needs lab_platform=fidelity"),
    ([{"lab_firmware_slots": [2]}], "needs lab_firmware=thunderbolt"),
    (["lab_vm_vcpus=2", "lab_vms_count=3"], "lab_vms_count is unknown"),
]


def _tree(path):
    """A digest of a directory tree (names, modes, contents)."""
    if not path.exists():
        return None
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        st = p.lstat()
        h.update(f"{p.relative_to(path)} {st.st_mode:o} {st.st_size}\n".encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


def _listing(path):
    return sorted(os.listdir(path)) if path.is_dir() else None


def snapshot(sandbox):
    """What no refused run may change: the sandbox the runs were pointed at
    (their state directory, results root and a victim directory a hostile
    prefix aims at), the file system's root and libvirt's domains."""
    return {
        "sandbox": _tree(sandbox),
        "victim": _tree(sandbox / "victim-1"),
        "root": _listing(pathlib.Path("/")),
        "domains": sorted(d for d in domains() if d.startswith(tagged("pciehp-safety"))),
    }


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """Runs every BAD input (4 at a time) around one snapshot. Each run's
    lab_state_dir and lab_results_root are in a sandbox unless the input
    names them itself."""
    sandbox = tmp_path_factory.mktemp("safety")
    (sandbox / "state" / "vms").mkdir(parents=True)
    (sandbox / "results").mkdir()
    victim = sandbox / "victim-1"
    (victim / "sub").mkdir(parents=True)
    (victim / "keep").write_text("a directory the lab must never remove\n")
    (victim / "sub" / "keep2").write_text("nor this\n")
    before = snapshot(sandbox)

    def one(case):
        extra, _ = case
        given = " ".join(e if isinstance(e, str) else json.dumps(e) for e in extra)
        base = [] if "lab_name_prefix" in given else ["lab_name_prefix=" + PREFIX]
        if "lab_state_dir" not in given:
            base.append(f"lab_state_dir={sandbox}/state")
        if "lab_results_root" not in given:
            base.append(f"lab_results_root={sandbox}/results")
        return playbook(*base, *extra, timeout=300)

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, BAD))
    after = snapshot(sandbox)
    yield results, before, after


@pytest.mark.parametrize("index", range(len(BAD)), ids=[f"{i}-{b[1][:40]}" for i, b in enumerate(BAD)])
def test_bad_input_is_refused_naming_it(refused, index):
    results, _, _ = refused
    r = results[index]
    needle = BAD[index][1]
    assert r.returncode != 0, r.stdout[-2000:]
    assert needle in r.stdout, r.stdout[-3000:]
    assert "profile field" in r.stdout
    # refused in the validate phase: no play after it began
    assert "PLAY [Set up the hypervisor hosts]" not in r.stdout
    assert "TASK [Create the run's results directory]" not in r.stdout


def test_nothing_outside_changed(refused):
    _, before, after = refused
    assert before["victim"] is not None and before["sandbox"] is not None
    assert after == before


def test_every_declared_variable_is_checked_and_documented():
    schema = lab_profile.load_schema()
    for name, spec in schema["variables"].items():
        assert name.startswith("lab_"), name
        assert spec.get("help"), f"{name} has no help line"
        assert "default" in spec, f"{name} has no default"
        # the default itself passes the check
        default = spec["default"]
        if isinstance(default, str):
            default = default.replace("{{ lab_repo_dir }}", str(REPO))
        lab_profile.check_value(name, default, spec, ["smoke", "bulk-surprise-removal", "quick-swap",
                                                              "storm", "orderly-removal", "hot-add-bulk",
                                                              "aer-recovery"])
    # a name is a profile variable or the lab's own, never both
    assert not set(schema["variables"]) & set(schema["internal"])


def test_the_defaults_come_from_the_declaration():
    """The vars plugin gives the declared defaults; no second copy exists."""
    assert not (REPO / "inventory/group_vars/all/profile.yml").exists()
    r = run(["ansible", "localhost", "-m", "ansible.builtin.debug", "-a", "var=lab_slots"])
    assert r.returncode == 0, r.stdout + r.stderr
    default = lab_profile.load_schema()["variables"]["lab_slots"]["default"]
    assert f'"lab_slots": {default}' in r.stdout, r.stdout


def test_a_bad_hypervisor_uri_is_refused(tmp_path):
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps({"all": {"children": {"hypervisors": {"hosts": {"hv-bad": {
        "ansible_connection": "local", "lab_libvirt_uri": "qemu:///system; touch /tmp/x"}}}}}}))
    r = playbook("lab_name_prefix=" + PREFIX, inventories=(inv,), timeout=300)
    assert r.returncode != 0
    assert "inventory host hv-bad" in r.stdout and "lab_libvirt_uri" in r.stdout, r.stdout[-3000:]


# --- past validation: directories the lab did not make ---------------------

def test_a_run_id_naming_a_directory_the_lab_did_not_make_is_refused(tmp_path):
    root = tmp_path / "results"
    mine = root / "precious"
    mine.mkdir(parents=True)
    (mine / "data").write_text("not the lab's\n")
    r = playbook("lab_name_prefix=" + PREFIX, "lab_results_root=" + str(root), "lab_run_id=precious",
                 playbook_file="playbooks/validate.yml", timeout=300)
    assert r.returncode != 0
    assert "has no .pciehp-lab-run" in r.stdout, r.stdout[-3000:]
    assert (mine / "data").read_text() == "not the lab's\n"


def test_a_planted_link_under_the_results_root_is_refused(tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / ".pciehp-lab-run").write_text("")
    (target / "data").write_text("keep\n")
    (root / "run1").symlink_to(target)
    r = playbook("lab_name_prefix=" + PREFIX, "lab_results_root=" + str(root), "lab_run_id=run1",
                 playbook_file="playbooks/validate.yml", timeout=300)
    assert r.returncode != 0
    assert "is not a directory the lab made (a link or a file)" in r.stdout, r.stdout[-3000:]
    assert (target / "data").exists()


def test_a_rerun_replaces_only_its_own_run_directory(tmp_path):
    root = tmp_path / "results"
    for _ in range(2):
        r = playbook("lab_name_prefix=" + PREFIX, "lab_results_root=" + str(root), "lab_run_id=again",
                     playbook_file="playbooks/validate.yml", timeout=300)
        assert r.returncode == 0, r.stdout[-3000:]
        assert (root / "again" / ".pciehp-lab-run").exists()
        (root / "again" / "old-record").write_text("x")
    assert (root / "again" / "old-record").exists()


def _lab_tree(tmp_path, **args):
    return run(["ansible", "localhost", "-m", "lab_tree", "-a", json.dumps(args)])


def test_lab_tree_removes_only_marked_directories_inside_its_root(tmp_path):
    root = tmp_path / "vms"
    root.mkdir()
    (root / "vm-1").mkdir()
    (root / "vm-1" / ".pciehp-lab-vm").write_text("")
    (root / "vm-1" / "root.qcow2").write_text("x")
    (root / "foreign").mkdir()
    (root / "foreign" / "data").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".pciehp-lab-vm").write_text("")
    r = _lab_tree(tmp_path, path=str(root / "foreign"), root=str(root), marker=".pciehp-lab-vm", state="absent")
    assert r.returncode != 0 and "has no .pciehp-lab-vm" in r.stdout
    r = _lab_tree(tmp_path, path=str(root / ".." / "outside"), root=str(root), marker=".pciehp-lab-vm",
                  state="absent")
    assert r.returncode != 0 and "does not lie inside" in r.stdout
    r = _lab_tree(tmp_path, path=str(root), root=str(root), marker=".pciehp-lab-vm", state="absent")
    assert r.returncode != 0 and "does not lie inside" in r.stdout
    (root / "link").symlink_to(outside)
    r = _lab_tree(tmp_path, path=str(root / "link"), root=str(root), marker=".pciehp-lab-vm", state="absent")
    assert r.returncode != 0
    r = _lab_tree(tmp_path, path=str(root / "vm-1"), root=str(root), marker=".pciehp-lab-vm", state="absent")
    assert r.returncode == 0, r.stdout
    assert not (root / "vm-1").exists()
    assert (root / "foreign" / "data").exists() and (outside / ".pciehp-lab-vm").exists()


def test_lab_tree_refuses_a_directory_with_a_mount_below(tmp_path):
    root = tmp_path / "vms"
    vm = root / "vm-1"
    (vm / "dev").mkdir(parents=True)
    (vm / ".pciehp-lab-vm").write_text("")
    r = run(["mount", "-t", "tmpfs", "lab-safety-test", str(vm / "dev")])
    assert r.returncode == 0, r.stderr
    try:
        (vm / "dev" / "node").write_text("must survive\n")
        r = _lab_tree(tmp_path, path=str(vm), root=str(root), marker=".pciehp-lab-vm", state="absent")
        assert r.returncode != 0 and "is mounted below it" in r.stdout, r.stdout
        assert (vm / "dev" / "node").exists()
    finally:
        run(["umount", str(vm / "dev")])


def test_image_build_does_not_remove_a_tree_with_a_mount_below(tmp_path):
    """image-build's rm_tree (the one it uses for chroot roots) refuses
    while a file system is still mounted below the root."""
    rootdir = tmp_path / "root"
    (rootdir / "dev").mkdir(parents=True)
    r = run(["mount", "-t", "tmpfs", "lab-safety-test", str(rootdir / "dev")])
    assert r.returncode == 0, r.stderr
    try:
        (rootdir / "dev" / "node").write_text("host device stand-in\n")
        script = ('eval "$(sed -n \'/^rm_tree() {/,/^}/p\' lab/tools/image-build)"; rm_tree "$1"')
        r = run(["bash", "-c", script, "rm_tree", str(rootdir)])
        assert r.returncode != 0 and "NOT removing" in r.stderr, r.stderr
        assert (rootdir / "dev" / "node").exists()
    finally:
        run(["umount", str(rootdir / "dev")])
    r = run(["bash", "-c", script, "rm_tree", str(rootdir)])
    assert r.returncode == 0 and not rootdir.exists(), r.stderr


# --- one run at a time per name prefix --------------------------------------

def _start_time(pid):
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def test_a_second_run_with_the_same_prefix_is_refused_naming_the_first(tmp_path):
    prefix = tagged("pciehp-safety-lock")
    locks = STATE_DIR / "locks"
    locks.mkdir(parents=True, exist_ok=True, mode=0o700)
    holder = subprocess.Popen(["sleep", "300"])
    try:
        time.sleep(0.2)
        lock = locks / (prefix + ".lock")
        lock.write_text(json.dumps({"pid": holder.pid, "start": _start_time(holder.pid), "run_id": "first-run",
                                    "since": "2026-12-04T00:00:00Z"}))
        r = playbook("lab_name_prefix=" + prefix, "lab_results_root=" + str(tmp_path / "results"),
                     "lab_run_id=second-run", playbook_file="playbooks/validate.yml", timeout=300)
        assert r.returncode != 0
        assert "another run uses lab_name_prefix=" + prefix in r.stdout, r.stdout[-3000:]
        assert "first-run" in r.stdout and str(holder.pid) in r.stdout
        assert not (tmp_path / "results" / "second-run").exists()
    finally:
        holder.kill()
        holder.wait()
    # the first run is gone (killed): its lock is taken over
    r = playbook("lab_name_prefix=" + prefix, "lab_results_root=" + str(tmp_path / "results"),
                 "lab_run_id=third-run", playbook_file="playbooks/validate.yml", timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]
    assert json.loads(lock.read_text())["run_id"] == "third-run"
    lock.unlink()


# --- values are escaped where they enter XML and QEMU options ---------------

def test_domain_xml_escapes_what_it_is_given(tmp_path):
    profile = lab_topology.lab_validate_profile(
        {"lab_vms": 1, "lab_slots": 2, "lab_drives": 2, "lab_kernel_variant": "patched", "lab_scenarios": ["smoke"],
         "lab_iterations": 1, "lab_chassis": 1, "lab_slot_numbers": [], "lab_platform": "stock"}, ["smoke"])
    vmdir = tmp_path / "a,b&c"
    vmdir.mkdir()
    cmdline = "root=/dev/vda x='1' y=\"2\" </cmdline><evil/> & more"
    vm = {"name": "n", "index": 1, "run_id": "r", "variant": "patched", "dir": str(vmdir),
          "kernel": str(vmdir / "vmlinuz"), "initrd": "", "cmdline": cmdline,
          "slots": lab_topology.lab_slot_map(profile, 1), "jbofs": [], "memory_mib": 256, "vcpus": 1,
          "emulator": "/usr/bin/qemu-system-x86_64"}
    xml = domain_env().get_template("lab-vm.xml.j2").render(vm=vm)
    (tmp_path / "d.xml").write_text(xml)
    r = run(["virt-xml-validate", str(tmp_path / "d.xml"), "domain"])
    assert r.returncode == 0, r.stdout + r.stderr
    root = ET.fromstring(xml)
    assert root.find("os/cmdline").text == cmdline
    args = [a.get("value") for a in root.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg")]
    assert f"file,id=lab-debugcon,path={vmdir}/debugcon.log".replace("a,b", "a,,b") in args
    drives = [a for a in args if a.startswith("driver=file,")]
    assert drives and all(",,b&c/" in a for a in drives), drives
    devices = [json.loads(a) for a in args if a.startswith("{") and '"nvme"' in a]
    assert [d["bus"] for d in devices] == ["pci.1", "pci.2"]
