"""The README stays a front page (the two commands, what a run does,
where to read next) and every document it points to exists."""
import re

from conftest import REPO


def test_readme_is_a_front_page():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 200
    # the two commands of a fresh machine come first
    first = text.split("```sh", 1)[1].split("```", 1)[0]
    assert "ansible-playbook lab.yml" in first and "bash tests/run" in first


def test_every_document_the_readme_names_exists():
    text = (REPO / "README.md").read_text()
    named = set(re.findall(r"\b((?:docs|kernel|qemu|profiles)/[A-Za-z0-9_.-]+\.md)\b", text))
    assert named, "the README points to no document"
    missing = sorted(n for n in named if not (REPO / n).is_file())
    assert not missing, missing
