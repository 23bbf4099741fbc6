"""Linters over everything that has one."""

import pytest

from conftest import REPO, run


def shell_scripts():
    files = [REPO / "tests/run", REPO / ".ci/run"]
    for p in (REPO / "lab/tools").iterdir():
        if p.is_file() and p.read_bytes()[:2] == b"#!" and b"bash" in p.read_bytes()[:40]:
            files.append(p)
    return files


def test_yamllint():
    r = run(["yamllint", "-s", "."])
    assert r.returncode == 0, r.stdout + r.stderr


def test_ansible_lint():
    r = run(["ansible-lint", "lab.yml", "playbooks/", "lab/roles/"])
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-4000:]


@pytest.mark.parametrize("script", shell_scripts(), ids=lambda p: str(p.relative_to(REPO)))
def test_shellcheck(script):
    r = run(["shellcheck", "-x", str(script)])
    assert r.returncode == 0, r.stdout + r.stderr


def test_c_tools_build_without_warnings():
    run(["make", "-C", "lab/tools", "clean"])
    r = run(["make", "-C", "lab/tools"])
    assert r.returncode == 0, r.stdout + r.stderr


def test_syntax_check():
    for pb in ["lab.yml"] + sorted(str(p.relative_to(REPO)) for p in (REPO / "playbooks").glob("*.yml")):
        r = run(["ansible-playbook", "--syntax-check", pb])
        assert r.returncode == 0, f"{pb}: {r.stdout}{r.stderr}"


def included_task_files():
    """(including file, task, the included file's path) for every
    include_tasks of a literal path under playbooks/."""
    import yaml
    out = []
    for pb in sorted((REPO / "playbooks").rglob("*.yml")):
        for task in yaml.safe_load(pb.read_text()) or []:
            if not isinstance(task, dict):
                continue
            target = task.get("ansible.builtin.include_tasks")
            if isinstance(target, str) and "{{" not in target:
                out.append((pb, task, (pb.parent / target).resolve()))
    return out


def test_loops_over_steps_that_read_ansible_loop_are_extended():
    # ansible_loop exists only with loop_control.extended: without it the
    # step fails at run time, on a VM, after the boot (seen: jbof-drive-removal)
    missing = [f"{pb.relative_to(REPO)}: {task.get('name')}"
               for pb, task, target in included_task_files()
               if "loop" in task and target.exists() and "ansible_loop." in target.read_text()
               and not (task.get("loop_control") or {}).get("extended")]
    assert not missing, missing
