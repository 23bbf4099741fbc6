"""Bad profiles are refused with a message naming the field, before any
domain, overlay or image is created."""

import re
import sys

import pytest
import yaml

from conftest import REPO, STATE_DIR, domains, playbook, tagged

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_profile  # noqa: E402

BAD = [
    (["lab_slots=0"], "lab_slots"),
    (["lab_slots=4", "lab_drives=5"], "lab_drives"),
    (["lab_slots=233"], "lab_slots"),
    ([{"lab_slots": 3, "lab_drives": 1, "lab_slot_numbers": [1, 2, 2]}], "duplicate chassis/slot"),
    (["lab_kernel_variant=vanilla"], "lab_kernel_variant"),
    ([{"lab_scenarios": ["smoke", "no-such-scenario"]}], "no-such-scenario"),
    (["lab_vms=0"], "lab_vms"),
    (["lab_slots=many"], "lab_slots"),
    ([{"lab_aer_errors": ["SDN; quit"]}], "lab_aer_errors"),
    (["lab_attention_button=false"], "needs lab_platform=fidelity"),
    ([{"lab_platform": "fidelity", "lab_attention_button": False, "lab_scenarios": ["smoke", "storm"]}],
     "press the Attention Button"),
    (["lab_dpc=true"], "lab_dpc=true needs lab_platform=fidelity"),
    ([{"lab_platform": "fidelity", "lab_scenarios": ["dpc-surprise-down"]}], "dpc-surprise-down needs lab_dpc=true"),
    (["lab_canary=true", "lab_canary_provoke=kasan"], "needs lab_kernel_variant=debug"),
    (["lab_kernel_variant=debug", "lab_canary_provoke=lockdep"], "needs lab_canary=true"),
    (["lab_canary=true", "lab_kernel_variant=debug", "lab_canary_provoke=oops"], "lab_canary_provoke"),
    (["lab_kernel_variant=tree"], "names tree, which needs lab_kernel_tree"),
    (["lab_kernel_tree=/srv/no-such-linux"], "lab_kernel_tree: --tree /srv/no-such-linux does not exist"),
    ([f"lab_kernel_tree={REPO}"], "is no kernel source tree"),
    ([f"lab_kernel_tree={REPO}", "lab_kernel_variants=stock,patched", "lab_vms=2"], "no VM boots it"),
    (["lab_kernel_quick=true"], "lab_kernel_quick=true needs lab_kernel_tree"),
    ([{"lab_scenarios": ["runtime-pm"]}], "runtime-pm needs lab_firmware=thunderbolt on a slot with a drive"),
    ([{"lab_slots": 4, "lab_drives": 2, "lab_firmware": "thunderbolt", "lab_firmware_slots": [1, 2],
       "lab_scenarios": ["runtime-pm"]}], "(missing: empty)"),
    ([{"lab_slots": 3, "lab_drives": 1, "lab_scenarios": ["aer-reset-storm"]}],
     "aer-reset-storm needs at least 2 root-port slot(s) with a drive"),
    ([{"lab_scenarios": ["jbof-yank"]}], "jbof-yank needs at least 1 JBOF(s) with drives"),
    ([{"lab_slots": 8, "lab_drives": 4, "lab_pci_hole64_mib": 0, "lab_bar_squeeze_blockers": 4,
       "lab_scenarios": ["bar-squeeze"]}], "than lab_bar_squeeze_blockers=4: lab_drives is 4"),
    (["lab_kernel_image=/etc/hostname"], "is no x86 bzImage"),
    (["lab_kernel_image=/srv/no-such-bzImage"], "lab_kernel_image=/srv/no-such-bzImage: No such file"),
    ([f"lab_kernel_tree={REPO}", "lab_kernel_image=/etc/hostname"], "are both set"),
]


@pytest.mark.parametrize("extra,needle", BAD, ids=[b[1] + "-" + str(i) for i, b in enumerate(BAD)])
def test_bad_profile_is_refused_before_anything_is_created(extra, needle):
    # only this test's names: other runs on the host come and go meanwhile
    prefix = tagged("pciehp-badprofile")
    r = playbook(*extra, "lab_name_prefix=" + prefix, "lab_run_id=" + tagged("test-bad-profile"))
    assert r.returncode != 0
    assert needle in r.stdout, r.stdout[-3000:]
    assert "profile field" in r.stdout or "duplicate" in r.stdout
    assert "PLAY [Set up the hypervisor hosts]" not in r.stdout, "refusal came after host setup began"
    assert not [d for d in domains() if d.startswith(prefix)]
    assert not list((STATE_DIR / "vms").glob(prefix + "*"))


def test_a_scenario_declares_its_requirements_in_its_own_header(tmp_path):
    """lab_scenario_requires reads each scenario file's "#   requires:"
    line; a line that is no mapping or names an unknown key is refused,
    naming the file."""
    import lab_topology
    from ansible.errors import AnsibleFilterError

    req = lab_topology.lab_scenario_requires(sorted(str(p) for p in (REPO / "playbooks/scenarios").glob("*.yml")))
    assert req["storm"] == {"attention_button": True} and req["jbof-concurrent"]["jbofs"] == 2
    assert req["runtime-pm"] == {"firmware_on": ["drive", "empty"]} and req["smoke"] == {}
    for line, needle in (("#   requires: {jbof: 1}", "requires must be a mapping of"),
                         ("#   requires: [drives]", "requires must be a mapping of"),
                         ("#   requires: {drives: [}", "is no YAML mapping")):
        bad = tmp_path / "bad-scenario.yml"
        bad.write_text(f"# bad-scenario: x\n{line}\n#   setup: y\n- name: x\n")
        with pytest.raises(AnsibleFilterError, match=re.escape(needle)):
            lab_topology.lab_scenario_requires([str(bad)])


def test_a_tree_too_old_or_built_in_place_is_refused():
    """lab_kernel_tree: kernel-build's checks run in validation; a 5.15 tree
    and a tree with a .config of its own (kbuild refuses O= then) are
    refused, naming what to fix, before anything is created."""
    tree = STATE_DIR / tagged("fake-linux")
    (tree / "scripts/kconfig").mkdir(parents=True, exist_ok=True)
    (tree / "scripts/kconfig/merge_config.sh").write_text("")
    prefix = tagged("pciehp-badtree")
    for makefile, config, needle in (("VERSION = 5\nPATCHLEVEL = 15\n", False, "is Linux 5.15: the lab needs 6.1"),
                                     ("VERSION = 6\nPATCHLEVEL = 6\n", True, "run 'make mrproper' in it")):
        (tree / "Makefile").write_text(makefile)
        if config:
            (tree / ".config").write_text("CONFIG_PCI=y\n")
        r = playbook(f"lab_kernel_tree={tree}", "lab_name_prefix=" + prefix, "lab_run_id=" + tagged("test-badtree"))
        assert r.returncode != 0 and needle in r.stdout, r.stdout[-3000:]
        assert "profile field lab_kernel_tree" in r.stdout
        assert "PLAY [Set up the hypervisor hosts]" not in r.stdout
    assert not [d for d in domains() if d.startswith(prefix)]


def test_a_rerun_without_the_running_vms_is_refused_before_anything_is_created():
    """lab_rerun keeps the VMs of the last run: with none of this prefix
    running the run stops in validation, naming the VM and what to do."""
    prefix = tagged("pciehp-norerun")
    r = playbook("lab_rerun=true", "lab_name_prefix=" + prefix, "lab_run_id=" + tagged("test-norerun"))
    assert r.returncode != 0
    assert f"lab_rerun: VM {prefix}-1 is not there" in r.stdout, r.stdout[-3000:]
    assert "run without lab_rerun=true" in r.stdout
    assert "PLAY [Set up the hypervisor hosts]" not in r.stdout, "refusal came after host setup began"
    assert not [d for d in domains() if d.startswith(prefix)]
    assert not list((STATE_DIR / "vms").glob(prefix + "*"))


# --- presets (profiles/*.yml) -------------------------------------------------

PRESETS = sorted((REPO / "profiles").glob("*.yml"))


def test_there_are_presets():
    assert len(PRESETS) >= 6


@pytest.mark.parametrize("preset", PRESETS, ids=[p.stem for p in PRESETS])
def test_preset_validates(preset, tmp_path):
    """Every preset names declared variables only and passes validation
    through `ansible-playbook -e @preset` as a user runs it."""
    values = yaml.safe_load(preset.read_text())
    schema = lab_profile.load_schema()
    assert set(values) <= set(schema["variables"]), set(values) - set(schema["variables"])
    assert not {"lab_name_prefix", "lab_run_id"} & set(values), "a preset must not name the run"
    prefix = tagged("pciehp-preset")
    r = playbook("@" + str(preset), "lab_name_prefix=" + prefix, "lab_results_root=" + str(tmp_path / "results"),
                 "lab_run_id=" + preset.stem, playbook_file="playbooks/validate.yml", timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]
    assert (tmp_path / "results" / preset.stem / ".pciehp-lab-run").exists()


def test_a_preset_with_a_misspelt_variable_is_refused(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("lab_slots: 4\nlab_drive: 2\n")
    r = playbook("@" + str(bad), "lab_name_prefix=" + tagged("pciehp-preset"),
                 "lab_results_root=" + str(tmp_path / "results"), playbook_file="playbooks/validate.yml", timeout=300)
    assert r.returncode != 0
    assert "profile field lab_drive is unknown: did you mean lab_drives?" in r.stdout, r.stdout[-3000:]


def test_the_variable_table_is_generated_from_the_declaration():
    """docs/profile.md is lab_profile_doc's output for lab/profile.yml."""
    doc = (REPO / "docs/profile.md").read_text()
    assert doc == lab_profile.lab_profile_doc(lab_profile.load_schema()), \
        "docs/profile.md is stale: /usr/bin/python3 lab/plugins/filter/lab_profile.py > docs/profile.md"
    for name in lab_profile.load_schema()["variables"]:
        assert f"| `{name}` |" in doc
