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
