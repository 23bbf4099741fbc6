"""labprobe's command line and kernel log reader without a VM: paths, numbers
and slot lists are refused (exit 2, naming the option) before anything is
done, no argument reaches a shell, and a kernel log that cannot be read is
an error, never a clean log.

labprobe is a guest tool: on this host it must never get past its argument
checks (it would arm kprobes, mount tracefs, write sysfs). Every command
line here that could act ends in SENTINEL, an argument no command knows:
labprobe reads its arguments in order and refuses the first bad one, so the
option under test must be refused first (the message names it), and if it
ever were not, the sentinel still stops the command before it acts. The
kernel log is read from files through LABPROBE_KMSG, never this host's."""

import json
import os
import re
import subprocess

import pytest

from conftest import CRASHES, REPO, run

SOURCES = REPO / "lab/tools/labprobe"
SENTINEL = "--sentinel-not-an-option"
# an abort()/free() of garbage: SIGABRT or SIGSEGV, as returncode or shell status


def probe(labprobe, *args, kmsg=None):
    """labprobe ARGS with the kernel log read from kmsg (default: a path
    that does not exist, so nothing here ever reads the host's log)."""
    env = dict(os.environ, LABPROBE_KMSG=str(kmsg or "/nonexistent/labprobe-test-kmsg"))
    return run([labprobe, *args], env=env, timeout=30)


def refused(r, option):
    """exit 2, nothing printed on stdout (no command ran), and the message
    names the option (not the sentinel behind it)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    assert option in r.stderr, r.stderr
    assert SENTINEL not in r.stderr, r.stderr


def test_no_shell_in_labprobe():
    """No argument reaches a shell: labprobe runs nothing through system()
    or popen() (fio is started with execvp and an argv array)."""
    for src in sorted(SOURCES.glob("*.[ch]")):
        text = src.read_text()
        for call in ("system(", "popen(", "execl(", "/bin/sh"):
            assert call not in text, f"{src.name} uses {call}"


@pytest.mark.parametrize("template", [
    "{tmp}/x'; touch {tmp}/pwned; '",
    "{tmp}/x; touch {tmp}/pwned",
    "{tmp}/x $(touch {tmp}/pwned)",
    "{tmp}/x`touch {tmp}/pwned`",
    "{tmp}/with space",
    "{tmp}/x\n{tmp}/pwned",
    "{tmp}/../pwned",
    "{tmp}/x/..",
    "relative/dir",
    "./dir",
    "",
    "/" + "d" * 300,
], ids=["quote", "semicolon", "dollar-paren", "backtick", "space", "newline", "dotdot", "trailing-dotdot",
        "relative", "dot-relative", "empty", "too-long"])
@pytest.mark.parametrize("order", ["dir-first", "slots-first"])
def test_arm_refuses_unsafe_dir(labprobe, tmp_path, template, order):
    """arm --dir: only an absolute path of plain characters; anything else
    exits 2 naming --dir, and no command in it runs (arm used to build
    `mkdir -p '%s' ...` for system())."""
    bad = template.format(tmp=tmp_path)
    args = ["--dir", bad, "--slots", "1"] if order == "dir-first" else ["--slots", "1", "--dir", bad]
    r = probe(labprobe, "arm", *args, SENTINEL)
    refused(r, "--dir")
    assert not (tmp_path / "pwned").exists()
    assert list(tmp_path.iterdir()) == [], "arm created something before refusing"


def test_arm_dir_checked_before_anything(labprobe, tmp_path):
    """A plain --dir passes the check and nothing is created while the
    arguments are read (the sentinel after it is what is refused); the same
    path with a quote in it is refused naming --dir."""
    good = tmp_path / "state" / "arm-1_x+y.z"
    r = probe(labprobe, "arm", "--dir", str(good), "--slots", "1,2", SENTINEL)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert SENTINEL in r.stderr and "--dir" not in r.stderr, r.stderr
    refused(probe(labprobe, "arm", "--dir", f"{good}'", "--slots", "1,2", SENTINEL), "--dir")
    assert not (tmp_path / "state").exists()


def test_collect_refuses_unsafe_dir(labprobe, tmp_path):
    r = probe(labprobe, "collect", "--dir", f"{tmp_path}/x'$(touch {tmp_path}/pwned)'", "--expect-gone", "1",
              SENTINEL)
    refused(r, "--dir")
    assert not (tmp_path / "pwned").exists()


# (command, option, kind): every number option, each read while labprobe
# goes through its arguments
NUMBER_OPTIONS = [
    ("view", "--timeout", "real"),
    ("view", "--since-seq", "int"),
    ("drives", "--timeout", "real"),
    ("drives", "--verify-mib", "int"),
    ("collect", "--timeout", "real"),
    ("collect", "--fio-timeout", "real"),
    ("collect", "--observe", "real"),
    ("pm", "--timeout", "real"),
    ("pm", "--hold", "real"),
    ("pme", "--wait-suspended", "real"),
    ("arm", "--fio-runtime", "int"),
    ("supervise", "--fio-runtime", "int"),
    ("arm", "--hung-task-timeout", "int"),
    ("smoke", "--cloud-init-wait", "int"),
    ("findings", "--context", "int"),
    ("findings", "--since-seq", "int"),
    ("dpc", "--since-seq", "int"),
    ("dpc", "--expect-contained", "int"),
]
BAD_NUMBERS = ["abc", "-1", "1e999", "", "5x", " 5", "nan", "inf", "0x", "99999999999999999999999"]


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
@pytest.mark.parametrize("command, option, kind", NUMBER_OPTIONS, ids=lambda v: v if isinstance(v, str) else "")
def test_bad_number_refused(labprobe, command, option, kind, value):
    """A number option takes a number in its range, whole: atoi/atof made
    `--timeout abc` 0 and `--timeout 5x` 5. The message names the option and
    the allowed range."""
    r = probe(labprobe, command, option, value, SENTINEL)
    refused(r, option)
    assert re.search(r"-?\d+ to \d+", r.stderr), r.stderr


@pytest.mark.parametrize("command, option", [(c, o) for c, o, kind in NUMBER_OPTIONS if kind == "int"])
def test_integer_options_refuse_fractions(labprobe, command, option):
    refused(probe(labprobe, command, option, "1.5", SENTINEL), option)


@pytest.mark.parametrize("command, option, good, bad", [
    ("view", "--timeout", "86400", "86400.5"),
    ("drives", "--timeout", "0.5", "-0.5"),
    ("findings", "--context", "0", "1001"),
    ("findings", "--since-seq", "12345", "-1"),
    ("arm", "--fio-runtime", "300", "0"),
    ("arm", "--hung-task-timeout", "0", "86401"),
    ("view", "--log", "60", "100001"),
])
def test_number_range_edges(labprobe, command, option, good, bad):
    """A value in range is taken (the sentinel behind it is what is
    refused); one just outside is refused with the range."""
    r = probe(labprobe, command, option, good, SENTINEL)
    assert r.returncode == 2 and SENTINEL in r.stderr and option not in r.stderr, r.stderr
    r = probe(labprobe, command, option, bad, SENTINEL)
    refused(r, option)
    assert "out of range" in r.stderr, r.stderr


def test_view_log_lines_checked(labprobe):
    refused(probe(labprobe, "view", "--log", "5x", SENTINEL), "--log")


SLOT_LISTS = [("view", "--slots"), ("arm", "--slots"), ("arm", "--fio"), ("collect", "--expect-gone"),
              ("collect", "--expect-kept"), ("smoke", "--slots"), ("pm", "--slots"), ("dpc", "--slots"),
              ("pme", "--slots")]


@pytest.mark.parametrize("command, option", SLOT_LISTS)
def test_long_slot_list_refused(labprobe, command, option):
    """More slots than labprobe has room for is an error, not a list cut at
    256 (or 64, or 512) without a word."""
    r = probe(labprobe, command, option, ",".join(str(i) for i in range(1, 601)), SENTINEL)
    refused(r, option)
    assert "more than" in r.stderr, r.stderr


@pytest.mark.parametrize("entry", ["x", "1a", "-1", "8192", "../1", "1 ", "1=x"])
@pytest.mark.parametrize("command, option", SLOT_LISTS)
def test_bad_slot_refused(labprobe, command, option, entry):
    """A slot is a physical slot number (0..8191): it goes into sysfs paths."""
    refused(probe(labprobe, command, option, f"1,{entry},3", SENTINEL), option)


@pytest.mark.parametrize("command, option, value", [
    ("drives", "--expect", "1=SERIAL,x=SERIAL"),
    ("drives", "--expect", "1"),
    ("view", "--expect", "../1=empty"),
    ("smoke", "--drive", "x=SERIAL"),
    ("smoke", "--drive", "1"),
    ("absent", "--slot", "../../x"),
])
def test_bad_slot_value_refused(labprobe, command, option, value):
    refused(probe(labprobe, command, option, value, SENTINEL), option)


def test_long_drive_list_refused(labprobe):
    r = probe(labprobe, "drives", "--expect", ",".join(f"{i}=S{i}" for i in range(300)), SENTINEL)
    refused(r, "--expect")


# ---- the kernel log ----

def findings(labprobe, kmsg, *args):
    r = probe(labprobe, "findings", *args, kmsg=kmsg)
    assert r.returncode not in CRASHES, (r.returncode, r.stderr)
    try:
        return r.returncode, json.loads(r.stdout), r.stderr
    except ValueError:
        pytest.fail(f"no JSON report (exit {r.returncode}): {r.stdout!r} {r.stderr!r}")


def record(seq, message, level=6, usec=None, dicts=()):
    """One /dev/kmsg record (Documentation/ABI/testing/dev-kmsg):
    "level,seq,usec,flags;message" and " KEY=value" continuation lines."""
    usec = seq * 1000 if usec is None else usec
    return f"{level},{seq},{usec},-;{message}\n" + "".join(f" {d}\n" for d in dicts)


WARNING = "WARNING: CPU: 0 PID: 1 at drivers/pci/hotplug/pciehp_ctrl.c:123 labprobe_test_marker+0x1/0x2"


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_kmsg_is_an_error(labprobe, tmp_path, kind):
    """A log that cannot be opened or read: exit 1, an error naming the log
    and why, a kmsg-error finding; never an empty clean report (or a free()
    of an uninitialised pointer)."""
    path = tmp_path / "kmsg" if kind == "missing" else tmp_path
    rc, rep, _ = findings(labprobe, path)
    assert rc == 1, rep
    assert rep["ok"] is False
    assert str(path) in rep["error"]
    assert ("No such file or directory" if kind == "missing" else "Is a directory") in rep["error"]
    assert [f["kind"] for f in rep["findings"]] == ["kmsg-error"]
    assert rep["kmsg_last_seq"] is None


def test_missing_dev_kmsg(labprobe):
    """Without LABPROBE_KMSG the log is /dev/kmsg: with no /dev/kmsg (an
    empty /dev in a private mount namespace) findings says so; it used to
    free an uninitialised pointer there."""
    script = 'mount --make-rprivate / && mount -t tmpfs labprobe-test /dev && exec "$0" findings'
    try:
        r = subprocess.run(["unshare", "-m", "sh", "-c", script, labprobe], capture_output=True, text=True,
                           timeout=30, env={k: v for k, v in os.environ.items() if k != "LABPROBE_KMSG"})
    except FileNotFoundError:
        pytest.skip("no unshare")
    if r.returncode != 0 and not r.stdout and r.returncode not in CRASHES:
        pytest.skip("cannot hide /dev in a mount namespace here: " + r.stderr.strip())
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    rep = json.loads(r.stdout)
    assert "/dev/kmsg" in rep["error"] and "No such file or directory" in rep["error"], rep


def test_fake_kmsg_warning_found(labprobe, tmp_path):
    """A WARNING record in a file of records is a finding, with its context;
    the reader takes many records a read (as a file returns them), continuation
    lines, and a last record without its newline."""
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(record(1, "Linux version 6.1.0-test")
                    + record(2, "pcieport 0000:00:1c.0: pciehp: Slot #1 ...", dicts=["SUBSYSTEM=pci",
                                                                                     "DEVICE=+pci:0000:00:1c.0"])
                    + record(3, WARNING, level=4)
                    + record(4, "Call Trace:", level=4)
                    + "6,5,5000,-;the last record, cut")
    rc, rep, _ = findings(labprobe, kmsg, "--context", "1")
    assert rc == 1, rep
    assert "error" not in rep
    assert rep["kmsg_last_seq"] == 5
    assert rep["kmsg_overrun"] == 0
    [f] = rep["findings"]
    assert f["kind"] == "warning" and f["line"] == WARNING
    assert len(f["context"]) == 3 and "Slot #1" in f["context"][0] and "Call Trace" in f["context"][2]

    # the warning before --since-seq is not this scenario's
    rc, rep, _ = findings(labprobe, kmsg, "--since-seq", "3")
    assert rc == 0 and rep["findings"] == [] and rep["ok"] is True, rep


def test_fake_kmsg_many_reads(labprobe, tmp_path):
    """A log larger than one read: records cut at the read boundary are put
    together, the warning near the end is found once."""
    recs = [record(i, f"filler record {i} " + "x" * (i % 200)) for i in range(1, 3000)]
    recs.append(record(3000, WARNING, level=4))
    recs += [record(i, f"after {i}") for i in range(3001, 3100)]
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("".join(recs))
    assert kmsg.stat().st_size > 100000
    rc, rep, _ = findings(labprobe, kmsg, "--context", "0")
    assert rc == 1, rep
    assert [f["line"] for f in rep["findings"]] == [WARNING]
    assert rep["kmsg_last_seq"] == 3099 and rep["kmsg_overrun"] == 0


def test_clean_fake_kmsg(labprobe, tmp_path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(record(7, "nvme nvme0: 1/0/0 default/read/poll queues") + record(8, "all fine"))
    rc, rep, _ = findings(labprobe, kmsg)
    assert rc == 0, rep
    assert rep["findings"] == [] and rep["kmsg_last_seq"] == 8 and rep["kmsg_overrun"] == 0


def test_lost_records_counted(labprobe, tmp_path):
    """Records overwritten under the reader (EPIPE on /dev/kmsg, which then
    goes on at the oldest record left: a gap in the sequence numbers) are
    counted in kmsg_overrun and make a kmsg-gap finding, not skipped without
    a word."""
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(record(10, "a") + record(11, "b") + record(15, "c") + record(16, WARNING, level=4))
    rc, rep, _ = findings(labprobe, kmsg)
    assert rc == 1 and rep["kmsg_overrun"] == 3, rep
    assert [f["kind"] for f in rep["findings"]] == ["kmsg-gap", "warning"]
