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


# --- the profile is read one way ------------------------------------------------

# Playbooks, role files and templates read a declared field only as
# lab_profile.<field>: the validated profile (numbers as numbers, comma
# strings as lists, derived fields), which validate.yml gives every host of
# the run. The raw variables are read for validation alone, and by nothing
# this scan sees: validate.yml hands them to lab_profile_check through
# query('ansible.builtin.vars', *declared), naming none of them, and the vars
# plugin (lab/plugins/vars/lab_profile.py) is Python, giving their defaults.
PROFILE_READERS = ["lab.yml", "playbooks/**/*.yml", "lab/roles/**/*.yml", "lab/roles/**/*.j2", "domains/**/*.j2",
                   "inventory/**/*.yml"]
# lab_run_id is the run's id there: validate.yml's "Open the run" sets the
# fact (the field's value, or the start time) on localhost
DERIVED = {"lab_run_id"}
# play keywords are templated before any host's vars exist (not even
# hostvars): there the raw variable, validated by then, is the one way
PLAY_RAW = {("playbooks/scenarios.yml", "lab_vms_one_at_a_time")}
# task keys whose values are Jinja expressions without braces
BARE_KEYS = {"when", "failed_when", "changed_when", "until", "that"}
# play keywords Ansible templates with no host in scope: no host's own
# lab_profile there (a raw read there must be in PLAY_RAW)
PLAY_KEYS = {"hosts", "serial", "order", "max_fail_percentage", "strategy"}


def jinja_texts(path):
    """(line, Jinja template, whether it is a play keyword's) of each string
    of a YAML file (a bare expression wrapped in braces), or a template
    file's whole text."""
    text = path.read_text()
    if path.suffix == ".j2":
        yield 1, text, False
        return

    def walk(node, key=None, play=False):
        if isinstance(node, yaml.ScalarNode):
            bare = key in BARE_KEYS and "{{" not in node.value and "{%" not in node.value
            yield node.start_mark.line + 1, "{{ " + node.value + " }}" if bare else node.value, play
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                yield from walk(item, key)
        elif isinstance(node, yaml.MappingNode):
            keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
            for k, v in node.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else None
                yield from walk(v, name, "hosts" in keys and name in PLAY_KEYS)

    for doc in yaml.compose_all(text):
        if doc is not None:
            yield from walk(doc)


def other_profile_reads(path, names):
    """(line, what) of each read of a declared field other than
    lab_profile.<field>: a bare name (not an attribute, a filter, a test or a
    keyword argument), the name as a string ('lab_x': vars['lab_x'],
    lookup('vars', ...)), or another host's copy (hostvars[...].lab_profile)
    where the host's own is in scope."""
    import jinja2

    lexer = jinja2.Environment().lexer
    for line, template, play in jinja_texts(path):
        tokens = list(lexer.tokenize(template))
        for i, t in enumerate(tokens):
            before = tokens[i - 1].type if i else None
            after = tokens[i + 1].type if i + 1 < len(tokens) else None
            at = line + t.lineno - 1 if path.suffix == ".j2" else line
            if t.type == "name" and t.value in names and before not in ("dot", "pipe") and after != "assign" \
                    and not (before == "name" and tokens[i - 1].value == "is"):
                yield at, t.value
            elif t.type == "string" and t.value in names:
                yield at, repr(t.value)
            elif t.type == "name" and t.value == "hostvars" and after == "lbracket" and not play:
                j = next(k for k in range(i + 2, len(tokens)) if tokens[k].type == "rbracket")
                rest = [(x.type, x.value) for x in tokens[j + 1:j + 4]]
                if rest[:2] == [("dot", "."), ("name", "lab_profile")] or \
                        rest == [("lbracket", "["), ("string", "lab_profile"), ("rbracket", "]")]:
                    yield at, "hostvars[...].lab_profile"


def profile_names():
    return set(lab_profile.load_schema()["variables"]) - DERIVED


def test_a_raw_read_of_a_profile_field_is_found(tmp_path):
    """The scan finds each way a made-up task file and template could read
    a field past the validated profile, and nothing read through it."""
    tasks = tmp_path / "made-up.yml"
    tasks.write_text("""\
- name: Storm {{ lab_storm_actions }} times
  ansible.builtin.command:
    argv: [x, "{{ lab_profile.lab_storm_actions }}", "{{ hostvars['localhost'].lab_profile.lab_iterations }}"]
  loop: "{{ range(lab_iterations) | list }}"
  when:
    - lab_platform == 'fidelity' and lab_profile.lab_dpc
    - lab_profile.lab_canary is defined and lab_profile.lab_canary
  vars:
    seed: "{{ lab_profile.lab_storm_seed | lab_storm_seed(lab_run_id, 1) }}"
    nested: "{{ {'a': {'b': 1}} | combine({'c': lab_gone_timeout | int, 'text': 'lab_gone_timeout=1'}) }}"
    indirect: "{{ lookup('ansible.builtin.vars', 'lab_aer_errors') }}"
""")
    template = tmp_path / "made-up.xml.j2"
    template.write_text("<a>{{ lab_profile.lab_slots }}</a>\n<b>{% if lab_dpc %}x{% endif %}</b>\n")
    names = profile_names()
    assert sorted(other_profile_reads(tasks, names)) == [
        (1, "lab_storm_actions"), (3, "hostvars[...].lab_profile"), (4, "lab_iterations"), (6, "lab_platform"),
        (10, "lab_gone_timeout"), (11, "'lab_aer_errors'")]
    assert list(other_profile_reads(template, names)) == [(2, "lab_dpc")]
    # a play keyword has no host in scope: localhost's copy, but never the raw variable
    play = tmp_path / "made-up-play.yml"
    play.write_text("""\
- name: A play
  hosts: guests
  serial: "{{ 1 if hostvars['localhost'].lab_profile.lab_vms_one_at_a_time else '100%' }}"
  order: "{{ 'sorted' if lab_vms > 1 else 'inventory' }}"
  tasks:
    - name: Two VMs
      ansible.builtin.debug:
        msg: "{{ hostvars['localhost'].lab_profile.lab_vms }}"
""")
    assert sorted(other_profile_reads(play, names)) == [(4, "lab_vms"), (8, "hostvars[...].lab_profile")]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # Jinja's lexer on a '\{' of a regex
def test_playbooks_roles_and_templates_read_the_profile_one_way():
    """Every read of a declared field in playbooks, roles and templates is
    lab_profile.<field>: never the raw variable validation may have changed,
    nor hostvars['localhost'].lab_profile (every host has its own)."""
    names = profile_names()
    found = {}
    for pattern in PROFILE_READERS:
        for path in sorted(REPO.glob(pattern)):
            rel = str(path.relative_to(REPO))
            for line, what in other_profile_reads(path, names):
                found.setdefault((rel, what), []).append(line)
    wrong = {k: v for k, v in found.items() if k not in PLAY_RAW}
    assert not wrong, "read lab_profile.<field> instead: " + ", ".join(
        f"{f}:{lines[0]} {what}" for (f, what), lines in sorted(wrong.items()))
    assert PLAY_RAW <= set(found), f"no longer read that way, drop from PLAY_RAW: {PLAY_RAW - set(found)}"


# --- lab_topology's limits are the declaration's -------------------------------

def test_the_topology_takes_its_limits_from_the_declaration():
    """lab_topology's ranges and choices are lab/profile.yml's, and the
    declaration keeps to what the topology can address."""
    import lab_topology

    v = lab_profile.load_schema()["variables"]
    assert lab_topology.MAX_SLOTS == v["lab_slots"]["max"] <= lab_topology.ROOT_PORTS
    assert lab_topology.MAX_JBOFS == v["lab_jbofs"]["max"]
    assert lab_topology.MAX_JBOF_SLOTS == v["lab_jbof_slots"]["max"] <= 32     # devices on the switch's bus
    assert lab_topology.MAX_CHASSIS == v["lab_chassis"]["max"] <= 255          # 8-bit chassis numbers
    # JBOF slot numbers stay inside the 13-bit physical slot number
    top = lab_topology.MAX_JBOFS * lab_topology.JBOF_SLOT_BASE + lab_topology.MAX_JBOF_SLOTS
    assert top <= v["lab_slot_numbers"]["item"]["max"]
    assert lab_topology.PLATFORMS == tuple(v["lab_platform"]["choices"])
    assert lab_topology.FIRMWARES == tuple(v["lab_firmware"]["choices"])
    assert lab_topology.KERNEL_VARIANTS == tuple(v["lab_kernel_variant"]["choices"])


def test_a_changed_declaration_changes_the_topologys_limits(tmp_path, monkeypatch):
    """lab_topology loaded with a copy of lab/profile.yml whose ranges are
    narrower refuses what the copy refuses: no range of its own."""
    import importlib.util

    from ansible.errors import AnsibleFilterError

    text = (REPO / "lab/profile.yml").read_text()
    for field, old, new in (("lab_vms", "min: 1, max: 64,", "min: 1, max: 2,"),
                            ("lab_chassis", "min: 0, max: 255,", "min: 0, max: 100,"),
                            ("lab_jbofs", "min: 0, max: 8,", "min: 0, max: 3,")):
        line = re.search(rf"^  {field}: .*$", text, re.M).group(0)
        assert old in line, line
        text = text.replace(line, line.replace(old, new))
    copy = tmp_path / "profile.yml"
    copy.write_text(text)
    monkeypatch.setattr(lab_profile, "SCHEMA_PATH", str(copy))
    spec = importlib.util.spec_from_file_location("lab_topology_narrow", REPO / "lab/plugins/filter/lab_topology.py")
    narrow = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(narrow)
    assert narrow.MAX_JBOFS == 3 and narrow.MAX_CHASSIS == 100
    base = {"lab_slots": 4, "lab_drives": 1, "lab_scenarios": ["smoke"]}
    assert narrow.lab_validate_profile({**base, "lab_vms": 2}, ["smoke"])["lab_vms"] == 2
    for field, value, needle in (("lab_vms", 3, "lab_vms=3 is out of range: use 1 to 2"),
                                 ("lab_chassis", 101, "lab_chassis=101 is out of range: use 0 to 100"),
                                 ("lab_jbofs", 4, "lab_jbofs=4 is out of range: use 0 to 3")):
        with pytest.raises(AnsibleFilterError, match=re.escape(needle)):
            narrow.lab_validate_profile({**base, field: value}, ["smoke"])
