"""labprobe's option parsing (getopt_long through next_opt() in
lab/tools/labprobe/args.c), without a VM: an unknown option, a missing
value, an abbreviation and a bad number are refused with exit 2 and a
message naming the option, before the command does anything; the options
the playbooks pass are all still taken; a read-only command still runs.

labprobe is a guest tool: every run here has its test hooks pointed into
tmp_path (the kernel log, trace, state directories, rescan file, lock_stat,
boot id), and every command line that could act if its refusal ever broke
either ends in SENTINEL (an option no command knows, refused before the
command acts) or lacks an option the command requires."""

import json
import os

import pytest

from conftest import CRASHES, run

SENTINEL = "--sentinel-not-an-option"


def ids(v):
    return " ".join(v) if isinstance(v, list) else v


@pytest.fixture
def probe(labprobe, tmp_path):
    """labprobe ARGS with every test hook set under tmp_path; returns the
    CompletedProcess."""
    (tmp_path / "rescan").write_text("0")
    (tmp_path / "boot_id").write_text("boot-1\n")
    (tmp_path / "lock_stat").write_text("")
    (tmp_path / "kmsg").write_text("")
    env = dict(os.environ, LABPROBE_KMSG=str(tmp_path / "kmsg"), LABPROBE_TRACE=str(tmp_path / "trace"),
               LABPROBE_RESCAN=str(tmp_path / "rescan"), LABPROBE_RESCAN_STATE=str(tmp_path / "rescan-state"),
               LABPROBE_LOCK_STAT=str(tmp_path / "lock_stat"), LABPROBE_BOOT_ID=str(tmp_path / "boot_id"),
               LABPROBE_LOG_STATE=str(tmp_path / "log-state"))

    def go(*args):
        r = run([labprobe, *args], env=env, timeout=30)
        assert r.returncode not in CRASHES, (r.returncode, r.stderr)
        return r
    return go


def refused(r, *needles):
    """exit 2, no report on stdout (nothing ran), each needle in stderr, the
    message in labprobe's own "labprobe CMD: ..." form (not getopt's)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    assert r.stderr.startswith("labprobe "), r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


# every command, as its arguments start (log-window and rescan-loop: the action)
COMMANDS = [["smoke"], ["findings"], ["arm"], ["collect"], ["supervise"], ["drives"], ["pm"], ["absent"], ["pme"],
            ["dpc"], ["view"], ["rescan-loop", "start"], ["rescan-loop", "stop"], ["lockstat"], ["log-window", "start"],
            ["log-window", "end"]]


@pytest.mark.parametrize("cmd", COMMANDS, ids=" ".join)
def test_unknown_option_is_named(probe, cmd):
    r = probe(*cmd, "--no-such-option", SENTINEL)
    refused(r, "unknown option '--no-such-option'")
    assert SENTINEL not in r.stderr, r.stderr


@pytest.mark.parametrize("cmd, option", ids=ids, argvalues=[
    (["view", "--slots", "1"], "--slot"),             # --slots
    (["pm", "--slots", "1"], "--ho"),                 # --hold
    (["dpc", "--slots", "1"], "--expect"),            # ambiguous: --expect-contained, --expect-no-recovery
    (["findings"], "--since"),                        # --since-seq
    (["log-window", "end"], "--boot"),                # --boot-id
])
def test_abbreviations_are_unknown_options(probe, cmd, option):
    """getopt_long would take --slot for --slots: labprobe refuses it, so
    a typo never passes as another option."""
    refused(probe(*cmd, option, "1", SENTINEL), f"unknown option '{option}'")
    refused(probe(*cmd, f"{option}=1", SENTINEL), f"unknown option '{option}'")


# (arguments ending in an option without its value): each command lacks
# an option it requires (or acts only on its hooks), so nothing runs even
# if the missing value were ever overlooked
MISSING_VALUE = [
    (["smoke", "--release"], "--release"),
    (["smoke", "--release", "6.1", "--drive"], "--drive"),
    (["findings", "--since-seq"], "--since-seq"),
    (["findings", "--context"], "--context"),
    (["arm", "--dir"], "--dir"),
    (["arm", "--dir", "/run/labprobe-test", "--fio-runtime"], "--fio-runtime"),
    (["collect", "--expect-gone"], "--expect-gone"),
    (["collect", "--timeout"], "--timeout"),
    (["drives", "--expect"], "--expect"),
    (["drives", "--verify-mib"], "--verify-mib"),
    (["pm", "--slots"], "--slots"),
    (["pm", "--wait"], "--wait"),
    (["absent", "--slot"], "--slot"),
    (["pme", "--slots"], "--slots"),
    (["pme", "--expect-pmeie"], "--expect-pmeie"),
    (["dpc", "--since-seq"], "--since-seq"),
    (["view", "--slots"], "--slots"),
    (["view", "--since-seq"], "--since-seq"),
    (["rescan-loop", "stop", "--class"], "--class"),
    (["log-window", "start", "--token"], "--token"),
    (["log-window", "end", "--boot-id"], "--boot-id"),
]


@pytest.mark.parametrize("args, option", MISSING_VALUE, ids=ids)
def test_missing_value_is_named(probe, args, option):
    refused(probe(*args), f"{option} needs a value")


@pytest.mark.parametrize("args, option", ids=ids, argvalues=[
    (["findings", "--context=abc"], "--context"),
    (["findings", "--since-seq=-1"], "--since-seq"),
    (["view", "--slots", "1", "--timeout=5x"], "--timeout"),
    (["view", "--slots", "1", "--log=100001"], "--log"),
    (["view", "--slots", "1", "--log", "7q"], "--log"),
    (["drives", "--verify-mib", "1.5"], "--verify-mib"),
    (["rescan-loop", "start", "--interval-ms=0"], "--interval-ms"),
    (["log-window", "start", "--canary", "x"], "--canary"),
    (["arm", "--slots", "1,x"], "--slots"),
])
def test_bad_value_is_refused_by_its_parser(probe, args, option):
    """Values given either way (--OPT VALUE, --OPT=VALUE) go through the
    checked parsers of args.c: the message names the option and what it
    takes."""
    r = probe(*args, SENTINEL)
    refused(r, option)
    assert SENTINEL not in r.stderr, r.stderr


@pytest.mark.parametrize("args, needle", ids=ids, argvalues=[
    (["findings", "extra"], "unexpected argument 'extra'"),
    (["findings", "--", "extra"], "unexpected argument 'extra'"),
    (["absent", "--expect-ones=yes"], "--expect-ones takes no value"),
    (["findings", "-x"], "unknown option '-x'"),
])
def test_stray_arguments_are_refused(probe, args, needle):
    refused(probe(*args), needle)


# what the playbooks pass (playbooks/**/*.yml), each command's options in
# one line: all must be taken, so the only thing refused is the sentinel
PLAYBOOK_FORMS = [
    ["smoke", "--release", "6.1.0-lab", "--slots", "1,2", "--drive", "1=S1", "--drive", "2=S2",
     "--hostname", "h", "--cloud-init-wait", "120"],
    ["findings", "--since-seq", "3", "--context", "8"],
    ["arm", "--dir", "/run/labprobe/bulk", "--slots", "1,2", "--fio", "1,2", "--fio-runtime", "30",
     "--hung-task-timeout", "30"],
    ["collect", "--dir", "/run/labprobe/bulk", "--expect-gone", "1,2", "--expect-kept", "3", "--observe", "3",
     "--aer", "--timeout", "60", "--fio-timeout", "60"],
    ["drives", "--expect", "1=A,2=B", "--timeout", "60", "--verify-mib", "8"],
    ["pm", "--slots", "1,2", "--pm-cap", "--dyndbg", "--wakeup", "1=enabled", "--d3cold", "1,2", "--hold", "1",
     "--touch", "1", "--wait", "1=suspended", "--timeout", "30"],
    ["absent", "--slot", "5", "--expect-ones"],
    ["pme", "--slots", "1", "--wait-suspended", "5", "--expect-pmeie", "on", "--collect", "--expect-pme-untouched"],
    ["dpc", "--slots", "1,2", "--collect", "--expect-contained", "2", "--expect-no-recovery", "--since-seq", "7"],
    ["view", "--slots", "1,2", "--expect", "1=empty,2=SER", "--since-seq", "5", "--timeout", "20", "--log", "80"],
    ["view", "--slots", "1", "--log"],
    ["rescan-loop", "start", "--interval-ms", "100", "--keep-lock-stat"],
    ["rescan-loop", "stop", "--timeout", "5", "--class", "a", "--class", "b"],
    ["lockstat", "some_lock", "--reset", "other_lock"],
    ["log-window", "start", "--canary", "2", "--token", "tok"],
    ["log-window", "end", "--since-seq", "3", "--boot-id", "boot-1", "--token", "tok"],
]


@pytest.mark.parametrize("args", PLAYBOOK_FORMS, ids=lambda a: a[0] if a[0] not in ("rescan-loop", "log-window")
                         else " ".join(a[:2]))
def test_callers_options_are_all_taken(probe, args):
    r = probe(*args, SENTINEL)
    refused(r, f"unknown option '{SENTINEL}'")
    assert r.stderr.count("\n") == 1, r.stderr


def test_findings_runs_with_its_options(probe, tmp_path):
    """A read-only command on a file of records (LABPROBE_KMSG): its
    options, in either form, take effect."""
    warning = "WARNING: CPU: 0 PID: 1 at drivers/pci/hotplug/pciehp_ctrl.c:1 labprobe_args_test+0x1/0x2"
    (tmp_path / "kmsg").write_text(
        "6,1,1000,-;Linux version 6.1.0-test\n" + f"4,2,2000,-;{warning}\n" + "6,3,3000,-;pciehp: ready\n")
    r = probe("findings", "--context", "1")
    assert r.returncode == 1, (r.stdout, r.stderr)
    rep = json.loads(r.stdout)
    assert [f["line"] for f in rep["findings"]] == [warning] and rep["kmsg_last_seq"] == 3
    r = probe("findings", "--since-seq=2", "--context=0")
    assert r.returncode == 0, (r.stdout, r.stderr)
    rep = json.loads(r.stdout)
    assert rep["ok"] is True and rep["findings"] == [] and rep["command"] == "findings"
