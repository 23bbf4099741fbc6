"""hpslot's per-domain lock and pause record, and vm-watchdog's handling of a
domain left paused, against a tiny throwaway domain (TCG, 64 MiB, no disk,
one pcie-root-port; SeaBIOS idles in it).

The lock lives in a root-only directory (HPSLOT_LOCK_DIR, here a 0700 tmp
dir; /run/pciehp-lab/hpslot by default): a planted symlink or an open
directory is refused, a busy lock fails naming its holder (no lock, no
action), and a pause record left by a killed hpslot makes the next hpslot
(or vm-watchdog, after its grace) resume the domain."""

import fcntl
import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import time

import pytest

from conftest import REPO, URI, run, virsh

HPSLOT = REPO / "lab/tools/hpslot/hpslot"
WATCHDOG = REPO / "lab/tools/vm-watchdog"
DEFAULT_LOCK_DIR = pathlib.Path("/run/pciehp-lab/hpslot")
DOMAIN = f"pciehp-locktest-{os.getpid()}"

TINY_XML = f"""<domain type='qemu'>
  <name>{DOMAIN}</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='pci' model='pcie-root'/>
    <controller type='pci' model='pcie-root-port'/>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
"""


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


def domstate():
    return virsh("domstate", DOMAIN).stdout.strip()


def wait_state(want, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if domstate() == want:
            return True
        time.sleep(0.2)
    return domstate() == want


@pytest.fixture(scope="module")
def tiny_domain(libvirtd, tmp_path_factory):
    xml = tmp_path_factory.mktemp("domain") / "tiny.xml"
    xml.write_text(TINY_XML)
    virsh("destroy", DOMAIN)
    virsh("undefine", DOMAIN)
    try:
        r = virsh("define", str(xml))
        assert r.returncode == 0, r.stderr
        r = virsh("start", DOMAIN)
        assert r.returncode == 0, r.stderr
        yield DOMAIN
    finally:
        virsh("destroy", DOMAIN)
        virsh("undefine", DOMAIN)


@pytest.fixture
def dom(tiny_domain):
    """The tiny domain, running."""
    if domstate() == "paused":
        virsh("resume", DOMAIN)
    assert wait_state("running", 10), domstate()
    return tiny_domain


@pytest.fixture
def lock_dir(tmp_path):
    d = tmp_path / "locks"
    d.mkdir(mode=0o700)
    d.chmod(0o700)
    return d


def hpslot_env(lock_dir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPSLOT_")}
    if lock_dir is not None:
        env["HPSLOT_LOCK_DIR"] = str(lock_dir)
    env.update(extra)
    return env


def hpslot_run(hpslot, lock_dir, *args, timeout=60, **extra):
    return run([hpslot, "-c", URI, "--json", *args], env=hpslot_env(lock_dir, **extra), timeout=timeout)


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def write_lock(lock_dir, text):
    path = lock_dir / f"{DOMAIN}.lock"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


# ---- the lock directory and file -------------------------------------------

@pytest.mark.parametrize("target_exists", [True, False], ids=["existing-target", "dangling"])
def test_symlink_at_the_lock_path_is_refused_and_its_target_untouched(hpslot, dom, lock_dir, tmp_path,
                                                                      target_exists):
    target = tmp_path / "precious"
    if target_exists:
        target.write_text("do not touch\n")
        os.utime(target, (1_000_000_000, 1_000_000_000))
    link = lock_dir / f"{dom}.lock"
    link.symlink_to(target)
    r = hpslot_run(hpslot, lock_dir, "status", dom)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"lock file {link} is a symbolic link: refusing to follow it" in r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] is False and "symbolic link" in out["error"]
    assert "slots" not in out or out["slots"] == []
    assert link.is_symlink()
    if target_exists:
        assert target.read_text() == "do not touch\n"
        assert target.stat().st_mtime == 1_000_000_000
    else:
        assert not target.exists() and not target.is_symlink()
    assert domstate() == "running"


@pytest.mark.parametrize("make_bad, message", [
    (lambda d: d.chmod(0o770), "has mode 0770: group and others must have no access"),
    (lambda d: d.chmod(0o777), "has mode 0777: group and others must have no access"),
    (lambda d: d.chmod(0o701), "has mode 0701: group and others must have no access"),
    (lambda d: os.chown(d, 65534, 65534), "is owned by uid 65534, not by uid 0"),
], ids=["group-writable", "world-writable", "other-x", "not-root"])
def test_open_or_foreign_lock_dir_is_refused(hpslot, dom, lock_dir, make_bad, message):
    make_bad(lock_dir)
    r = hpslot_run(hpslot, lock_dir, "status", dom)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"lock directory {lock_dir} {message}" in r.stderr, r.stderr
    assert "nothing changed" in json.loads(r.stdout)["error"]
    assert list(lock_dir.iterdir()) == []


@pytest.mark.parametrize("slash", ["", "/"], ids=["plain", "trailing-slash"])
def test_symlinked_lock_dir_is_refused(hpslot, dom, lock_dir, tmp_path, slash):
    link = tmp_path / "linked-locks"
    link.symlink_to(lock_dir)
    r = hpslot_run(hpslot, f"{link}{slash}", "status", dom)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"lock directory {link} is a symbolic link: refusing to use it" in r.stderr
    assert list(lock_dir.iterdir()) == []


def test_missing_lock_dir_and_parent_are_created_0700(hpslot, dom, tmp_path):
    d = tmp_path / "new-parent" / "locks"
    r = hpslot_run(hpslot, d, "status", dom)
    assert r.returncode == 0, (r.stdout, r.stderr)
    for p in (d, d.parent):
        st = p.lstat()
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == 0, p
    lock = (d / f"{dom}.lock").lstat()
    assert stat.S_ISREG(lock.st_mode) and stat.S_IMODE(lock.st_mode) == 0o600


def test_default_lock_dir_is_root_only(hpslot, dom):
    lock = DEFAULT_LOCK_DIR / f"{dom}.lock"
    try:
        r = hpslot_run(hpslot, None, "status", dom)
        assert r.returncode == 0, (r.stdout, r.stderr)
        st = DEFAULT_LOCK_DIR.lstat()
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == 0
        st = lock.lstat()
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
    finally:
        if lock.is_file() and not lock.is_symlink():
            lock.unlink()


@pytest.mark.parametrize("name", ["../escape", ".hidden", "a b"])
def test_domain_name_that_cannot_name_a_lock_file_is_refused(hpslot, libvirtd, lock_dir, name):
    r = hpslot_run(hpslot, lock_dir, "status", name)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert f"domain name '{name}' is refused" in r.stderr
    assert list(lock_dir.iterdir()) == []


# ---- no lock, no action ----------------------------------------------------

@pytest.mark.parametrize("args", [["status"], ["remove", "--surprise"]], ids=["status", "remove"])
def test_busy_lock_fails_naming_its_holder_and_changes_nothing(hpslot, dom, lock_dir, args):
    path = write_lock(lock_dir, f"pid={os.getpid()} cmd=test")
    with open(path, "r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        t0 = time.monotonic()
        r = hpslot_run(hpslot, lock_dir, *args, dom, *(["pci.1"] if args[0] == "remove" else []),
                       HPSLOT_LOCK_WAIT="1")
        took = time.monotonic() - t0
    assert r.returncode == 1, (r.stdout, r.stderr)
    want = f"domain {dom} is locked by pid {os.getpid()} (cmd test)"
    assert want in r.stderr, r.stderr
    out = json.loads(r.stdout)
    assert want in out["error"] and "nothing changed" in out["error"]
    assert 1 <= took < 15, took
    # it did not act: no topology read, nothing about the slot, domain untouched
    assert "config_read" not in out and out["slots"] == [] and "holds no drive" not in r.stderr
    assert path.read_text() == f"pid={os.getpid()} cmd=test"
    assert domstate() == "running"


@pytest.mark.parametrize("value", ["soon", "-1", "3601", "nan"])
def test_bad_lock_wait_is_refused(hpslot, dom, lock_dir, value):
    r = hpslot_run(hpslot, lock_dir, "status", dom, HPSLOT_LOCK_WAIT=value)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"HPSLOT_LOCK_WAIT: '{value}' is not a number of seconds in 0..3600" in r.stderr


def test_a_clean_pause_leaves_no_record(hpslot, dom, lock_dir):
    """status without ECAM reads the slots in a pause (stop ... cont): the
    lock file is empty again afterwards (no holder, no pause line)."""
    r = hpslot_run(hpslot, lock_dir, "status", dom, HPSLOT_NO_ECAM="1")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["config_read"] == "cf8-paused"
    assert (lock_dir / f"{dom}.lock").read_text() == ""
    assert domstate() == "running"


# ---- a domain left paused --------------------------------------------------

def test_stale_pause_record_makes_the_next_hpslot_resume_the_domain(hpslot, dom, lock_dir):
    pid, since = dead_pid(), int(time.time()) - 60
    assert virsh("suspend", dom).returncode == 0
    assert wait_state("paused", 10)
    path = write_lock(lock_dir, f"pid={pid} cmd=remove since={since}\npaused=1 pid={pid} since={since}\n")
    r = hpslot_run(hpslot, lock_dir, "status", dom)
    assert r.returncode == 0, (r.stdout, r.stderr)
    out = json.loads(r.stdout)
    stale = out["stale_pause"]
    assert stale["resumed"] is True and stale["pid"] == pid and stale["pid_alive"] is False
    assert stale["record"] == f"paused=1 pid={pid} since={since}" and stale["qemu_status"] == "paused"
    assert out["state"] == "running"
    assert any(f"resumed domain {dom}, left paused by hpslot pid {pid} since" in n for n in out["notes"])
    assert f"hpslot: resumed domain {dom}, left paused by hpslot pid {pid} since" in r.stderr
    assert domstate() == "running"
    assert "paused=" not in path.read_text()


def test_stale_pause_record_on_a_running_domain_is_only_cleared(hpslot, dom, lock_dir):
    pid = dead_pid()
    path = write_lock(lock_dir, f"paused=1 pid={pid} since={int(time.time())}\n")
    r = hpslot_run(hpslot, lock_dir, "status", dom)
    assert r.returncode == 0, (r.stdout, r.stderr)
    out = json.loads(r.stdout)
    assert out["stale_pause"]["resumed"] is False and out["stale_pause"]["qemu_status"] == "running"
    assert path.read_text() == ""


def test_hpslot_killed_mid_pause_is_undone_by_the_next_one(hpslot, dom, lock_dir):
    """SIGKILL while the domain is stopped (gdb stops hpslot inside its
    0xCF8 pause and kills it): the pause record names it, and the next
    hpslot resumes the domain."""
    gdb = shutil.which("gdb")
    if not gdb:
        pytest.skip("gdb is not installed")
    r = run([gdb, "-q", "--batch", "-ex", "set pagination off", "-ex", "break hp_cf8_save", "-ex", "run",
             "-ex", "info inferiors", "-ex", "kill", "--args", hpslot, "-c", URI, "status", dom],
            env=hpslot_env(lock_dir, HPSLOT_NO_ECAM="1"), timeout=120)
    assert "hit Breakpoint 1, hp_cf8_save" in r.stdout, r.stdout + r.stderr
    assert domstate() == "paused"
    text = (lock_dir / f"{dom}.lock").read_text()
    pause = [line for line in text.splitlines() if line.startswith("paused=1 pid=")]
    assert len(pause) == 1, text
    pid = int(pause[0].split()[1].split("=")[1])
    assert f"process {pid}" in r.stdout, r.stdout
    r = hpslot_run(hpslot, lock_dir, "status", dom)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["stale_pause"]["pid"] == pid
    assert f"left paused by hpslot pid {pid}" in r.stderr
    assert domstate() == "running"


# ---- vm-watchdog -----------------------------------------------------------

GRACE, PERIOD = 5, 1


@pytest.fixture
def watchdog(dom, lock_dir, tmp_path):
    out = tmp_path / "run" / "vm"
    env = dict(os.environ, HPSLOT_LOCK_DIR=str(lock_dir), LAB_WATCHDOG_PERIOD=str(PERIOD),
               LAB_WATCHDOG_PAUSE_GRACE=str(GRACE), LAB_WATCHDOG_PING=str(10**11),
               LAB_WATCHDOG_SILENT=str(10**9))
    log = open(tmp_path / "watchdog.log", "w")
    p = subprocess.Popen([str(WATCHDOG), URI, dom, str(out), str(os.getpid())], env=env, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(2 * PERIOD)
    assert p.poll() is None, (tmp_path / "watchdog.log").read_text()
    yield p, out, tmp_path / "watchdog.log"
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)
    log.close()


def resumed_lines(out):
    path = out / "watchdog-resumed.json"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("record", [True, False], ids=["pause-record", "no-lock-file"])
def test_watchdog_resumes_a_domain_paused_with_nobody_holding_the_lock(dom, lock_dir, watchdog, record):
    p, out, log = watchdog
    pid = dead_pid()
    line = f"paused=1 pid={pid} since={int(time.time())}"
    if record:
        write_lock(lock_dir, line + "\n")
    assert virsh("suspend", dom).returncode == 0
    t0 = time.monotonic()
    assert wait_state("paused", 5)
    end = t0 + 40
    while time.monotonic() < end and not (domstate() == "running" and resumed_lines(out)):
        time.sleep(0.5)
    took = time.monotonic() - t0
    assert domstate() == "running", log.read_text()
    lines = resumed_lines(out)
    assert len(lines) == 1, log.read_text()
    assert lines[0]["vm"] == dom and lines[0]["paused_since"] and lines[0]["resumed_at"]
    assert lines[0]["pause_record"] == (line if record else None)
    assert GRACE - 1 <= took < GRACE + 3 * PERIOD + 20, took
    # it goes on watching
    time.sleep(2 * PERIOD)
    assert p.poll() is None and not (out / "watchdog.json").exists(), log.read_text()


def test_watchdog_leaves_a_paused_domain_alone_while_hpslot_holds_the_lock(dom, lock_dir, watchdog):
    p, out, log = watchdog
    path = write_lock(lock_dir, f"pid={os.getpid()} cmd=test\n")
    with open(path, "r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert virsh("suspend", dom).returncode == 0
        assert wait_state("paused", 5)
        end = time.monotonic() + GRACE + PERIOD + 3
        while time.monotonic() < end:
            assert domstate() == "paused", log.read_text()
            time.sleep(0.5)
        assert resumed_lines(out) == []
    # the lock is free now: the grace starts, then the watchdog resumes it
    t0 = time.monotonic()
    assert wait_state("running", GRACE + 2 * PERIOD + 20), log.read_text()
    assert time.monotonic() - t0 >= GRACE - PERIOD - 1
    end = time.monotonic() + 10
    while not resumed_lines(out) and time.monotonic() < end:
        time.sleep(0.2)
    assert [r["pause_record"] for r in resumed_lines(out)] == [None]
    assert p.poll() is None, log.read_text()
