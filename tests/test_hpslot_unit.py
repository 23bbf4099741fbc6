"""hpslot without a VM: its C unit tests (`make -C lab/tools check`) and the
command line's error handling, including an unknown domain on a live
libvirtd (clear message, non-zero exit, one JSON object with --json)."""

import json
import re

import pytest

from conftest import REPO, URI, run

HPSLOT = REPO / "lab/tools/hpslot/hpslot"


@pytest.fixture(scope="module")
def hpslot():
    r = run(["make", "-C", "lab/tools", "hpslot/hpslot"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert HPSLOT.exists()
    return str(HPSLOT)


@pytest.fixture(scope="module")
def libvirtd():
    r = run(["lab/tools/libvirt-up", URI], timeout=120)
    if r.returncode != 0:
        pytest.skip("libvirtd is not available: " + r.stderr.strip())


def test_make_check():
    r = run(["make", "-C", "lab/tools", "check"], timeout=300)
    # the last line of the tests' own output (make -C adds "make: Leaving directory")
    out = [line for line in r.stdout.strip().splitlines() if not re.match(r"make(\[\d+\])?: ", line)]
    assert r.returncode == 0, r.stdout + r.stderr
    assert out and re.fullmatch(r"\d+ passed, 0 failed", out[-1]), out[-3:]
    assert int(out[-1].split()[0]) > 100


def test_make_builds_both_tools():
    r = run(["make", "-C", "lab/tools"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert (REPO / "lab/tools/labprobe/labprobe").exists()
    assert HPSLOT.exists()


def test_help(hpslot):
    r = run([hpslot, "--help"])
    assert r.returncode == 0
    for word in ("status", "remove --orderly", "remove --surprise", "add", "exit status"):
        assert word in r.stdout
    for cmd, words in {"status": ("ECAM", "PDS"), "remove": ("0xCF8", "--cancel", "--wait-guest", "--when-reset", "x-sbr-count"),
                       "add": ("--serial", "null-co", "--wait"),
                       "absent": ("x-absent-reads", "--reset", "no lock")}.items():
        r = run([hpslot, cmd, "--help"])
        assert r.returncode == 0, r.stderr
        for w in words:
            assert w in r.stdout, (cmd, w)


@pytest.mark.parametrize("args, message", [
    ([], "no command"),
    (["frobnicate", "dom"], "unknown command 'frobnicate'"),
    (["status"], "no DOMAIN"),
    (["remove", "dom", "3"], "--orderly or --surprise"),
    (["remove", "--surprise", "dom"], "no SLOT"),
    (["remove", "--surprise", "--cancel", "dom", "3"], "no --cancel"),
    (["remove", "--orderly", "--timeout", "soon", "dom", "3"], "not a number of seconds"),
    (["remove", "--surprise", "dom", "3", "3"], "named twice"),
    (["remove", "--surprise", "dom", "slot3"], "is not a slot"),
    (["add", "dom"], "no SLOT"),
    (["add", "dom", "3", "4", "--serial", "x"], "exactly one SLOT"),
    (["add", "dom", "3", "--serial", "123456789012345678901"], "NVMe serial"),
    (["add", "dom", "3", "--size", "0"], "--size"),
    (["status", "dom", "--bogus"], "unknown option '--bogus'"),
    (["absent"], "no DOMAIN"),
    (["absent", "dom", "--surprise"], "does not go with `hpslot absent`"),
    (["status", "dom", "--reset"], "--reset belongs to `hpslot absent`"),
    (["remove", "--surprise", "--when-reset", "5000", "dom", "3", "4"], "--when-reset goes with remove --surprise of "
     "exactly one SLOT"),
    (["remove", "--surprise", "--after-reset-ms", "5", "dom", "3"], "--after-reset-ms goes with --when-reset"),
    (["remove", "--surprise", "--when-reset", "5000", "--when-masked", "5000", "dom", "3"], "exclude each other"),
])
def test_usage_errors(hpslot, args, message):
    r = run([hpslot, *args])
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert message in r.stderr, (args, r.stderr)
    assert r.stdout == ""


def test_usage_error_json(hpslot):
    r = run([hpslot, "--json", "remove", "dom", "3"])
    assert r.returncode == 2
    out = json.loads(r.stdout)
    assert out["ok"] is False and out["exit"] == 2
    assert "--orderly or --surprise" in out["error"]


@pytest.mark.parametrize("args, message", [
    (["status", "dom", "--bogus", "--json"], "unknown option '--bogus'"),
    (["swap", "dom", "3", "--delay-ms", "x", "--json"], "--delay-ms 'x'"),
    (["remove", "--orderly", "--surprise", "--json", "dom", "3"], "exclude each other"),
    (["status", "dom", "--reset", "--json"], "--reset belongs to `hpslot absent`"),
])
def test_usage_error_json_after_bad_option(hpslot, args, message):
    """--json counts wherever it stands, also after the bad option."""
    r = run([hpslot, *args])
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    out = json.loads(r.stdout)
    assert out["ok"] is False and out["exit"] == 2
    assert message in out["error"] and message in r.stderr, (args, out, r.stderr)


@pytest.mark.parametrize("args", [
    ["status"],
    ["remove", "--surprise"],
    ["remove", "--orderly"],
    ["add"],
    ["absent", "--reset"],
])
def test_unknown_domain(hpslot, libvirtd, args):
    name = "hpslot-test-no-such-domain"
    r = run([hpslot, "-c", URI, *args, name, *([] if args == ["status"] else ["3"])], timeout=60)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert f"no domain named '{name}'" in r.stderr
    r = run([hpslot, "--json", "-c", URI, *args, name, "3"], timeout=60)
    assert r.returncode == 3
    out = json.loads(r.stdout)
    assert out["ok"] is False and out["exit"] == 3
    assert out["domain"] == name and name in out["error"]


def test_bad_uri(hpslot):
    r = run([hpslot, "-c", "qemu:///no-such-path", "status", "dom"], timeout=60)
    assert r.returncode == 1
    assert "cannot connect to libvirt" in r.stderr
