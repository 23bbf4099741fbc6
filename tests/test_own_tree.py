"""A kernel developer's own tree (lab_kernel_tree) and git bisect over it
(lab/tools/bisect-run), on a git repository made here from Debian's
linux-source with three commits of our own:

  base     Debian's tree as it is
  marker   pciehp logs a marker line when its driver registers
  breaks   pciehp_unconfigure_device() no longer removes the devices below
           a slot (the regression: a surprise-removed drive stays)
  docs     a line in README (harmless)

The run on `marker` must show the line in the guest and label the kernel
tree:<describe>; `git bisect run` between base and docs must name
`breaks`. Both build the tree (a full build the first time, about as long
as the lab's own kernel): heavy."""

import json
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import REPO, STATE_DIR, booted_vm, run, tagged

MARKER = "pciehp-lab own-tree marker"
TREE = STATE_DIR / tagged("own-tree-linux")


def git(*args, check=True):
    return subprocess.run(["git", "-C", str(TREE), *args], text=True, capture_output=True, check=check)


def edit(path, old, new):
    p = TREE / path
    s = p.read_text()
    assert old in s, (path, old)
    p.write_text(s.replace(old, new, 1))


@pytest.fixture(scope="module")
def own_tree():
    """The synthetic git tree; its commits by name."""
    ok = TREE / ".git/lab-own-tree-complete"
    if not ok.exists():
        shutil.rmtree(TREE, ignore_errors=True)
        TREE.mkdir(parents=True)
        subprocess.run(["tar", "-C", str(TREE), "--strip-components=1", "-xJf", "/usr/src/linux-source-6.1.tar.xz"],
                       check=True)
        git("init", "-q")
        git("config", "user.email", "lab@pciehp-lab.invalid")
        git("config", "user.name", "pciehp-lab test")
        # -f: Debian's .gitignore ignores everything at the top level
        git("add", "-A", "-f")
        git("commit", "-q", "-m", "base: Debian's linux-source")
        edit("drivers/pci/hotplug/pciehp_core.c", "\tretval = pcie_port_service_register(&hpdriver_portdrv);",
             f'\tpr_info("{MARKER}\\n");\n\tretval = pcie_port_service_register(&hpdriver_portdrv);')
        git("commit", "-q", "-am", "marker: pciehp logs a marker line")
        edit("drivers/pci/hotplug/pciehp_pci.c", "\tlist_for_each_entry_safe_reverse(dev, temp, &parent->devices,",
             "\tif (!presence)\n\t\tgoto out;\n\tlist_for_each_entry_safe_reverse(dev, temp, &parent->devices,")
        edit("drivers/pci/hotplug/pciehp_pci.c", "\tpci_unlock_rescan_remove();\n}",
             "out:\n\tpci_unlock_rescan_remove();\n}")
        git("commit", "-q", "-am", "breaks: surprise-removed devices stay")
        with open(TREE / "README", "a") as f:
            f.write("\nThis tree is a pciehp-lab test repository.\n")
        git("commit", "-q", "-am", "docs: a line in README")
        ok.touch()
    names = {}
    for line in git("log", "--format=%H %s").stdout.splitlines():
        sha, subject = line.split(" ", 1)
        names[subject.split(":")[0]] = sha
    yield names
    git("bisect", "reset", check=False)


@pytest.mark.heavy
def test_a_run_on_a_tree_of_ones_own(own_tree):
    """The tree at `marker`: built, booted, smoke passes; the guest's kernel
    log has the marker, and the results say which tree it was."""
    git("checkout", "-q", own_tree["marker"])
    gen = booted_vm(tagged("pciehp-owntree"), tagged("test-own-tree"), "the own-tree VM",
                    f"lab_kernel_tree={TREE}", "lab_slots=2", "lab_drives=1", {"lab_scenarios": ["smoke"]})
    vm = next(gen)
    try:
        s = vm.summary
        assert s["kernel"]["variant"] == "tree", s["kernel"]
        describe = git("describe", "--always", "--dirty", "--tags").stdout.strip()
        assert s["kernel"]["label"] == f"tree:{describe}" and s["kernel_labels"] == {"tree": f"tree:{describe}"}
        assert re.match(r"6\.1\.\d+-lab-tree", s["kernel"]["release"]), s["kernel"]
        # smoke, and the run's own last window of the kernel log (kernel-log)
        assert [(r["name"], r["status"]) for r in s["scenarios"]] == [("smoke", "pass"), ("kernel-log", "pass")], \
            json.dumps(s["scenarios"], indent=1)
        rc, out, err = vm.agent(f"dmesg | grep -c '{MARKER}'")
        assert rc == 0 and out.strip() == "1", (out, err)
    finally:
        next(gen, None)  # runs booted_vm to its end: the domain is removed


@pytest.mark.heavy
def test_bisect_names_the_commit_that_breaks_removal(own_tree):
    git("bisect", "reset", check=False)
    git("checkout", "-q", own_tree["docs"])
    git("bisect", "start", own_tree["docs"], own_tree["base"])
    r = run(["git", "-C", str(TREE), "bisect", "run", str(REPO / "lab/tools/bisect-run"),
             "-s", "bulk-surprise-removal", "--", "-e", "lab_slots=3", "-e", "lab_drives=2",
             "-e", "lab_name_prefix=" + tagged("pciehp-bisect")], timeout=4 * 3600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-5000:]
    assert f"{own_tree['breaks']} is the first bad commit" in out, out[-5000:]
    log = (TREE / ".git/bisect-run.log").read_text()
    assert "bad bulk-surprise-removal: fail" in log and " good " in log, log


def test_a_bzimage_names_its_release(tmp_path):
    """lab_kernel_image: the release comes from the bzImage's setup header
    (kernel_version at 0x20E, relative to 0x200); a file without the
    header is refused, naming it."""
    import sys
    sys.path.insert(0, str(REPO / "lab/plugins/filter"))
    import lab_topology
    from ansible.errors import AnsibleFilterError

    head = bytearray(0x400)
    head[0x202:0x206] = b"HdrS"
    head[0x20E:0x210] = (0x300 - 0x200).to_bytes(2, "little")
    head[0x300:0x340] = b"6.13.0-rc1-lab (builder@host) #1 SMP\0".ljust(0x40, b"\0")
    fake = tmp_path / "bzImage"
    fake.write_bytes(bytes(head))
    assert lab_topology._bzimage_release(str(fake)) == "6.13.0-rc1-lab"
    head[0x202:0x206] = b"MZ\0\0"
    fake.write_bytes(bytes(head))
    with pytest.raises(AnsibleFilterError, match="is no x86 bzImage"):
        lab_topology._bzimage_release(str(fake))
    # a kernel the lab built: the release its manifest names
    built = sorted((pathlib.Path("/var/cache/pciehp-lab/kernels")).glob("*/manifest.json"))
    for m in built[:2]:
        manifest = json.loads(m.read_text())
        assert lab_topology._bzimage_release(str(m.parent / "bzImage")) == manifest["release"]
