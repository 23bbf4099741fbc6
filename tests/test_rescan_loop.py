"""The bus rescan loop beside a scenario (lab_rescan_loop) and the lock
statistics that go with it: `labprobe rescan-loop` and `labprobe lockstat`
(lab/tools/labprobe/rescan.c) on this host through their test hooks, the
record they make (lab/plugins/filter/lab_rescan.py), and in the shared lab
VM a loop that really rescans: a drive removed through sysfs comes back.

labprobe is a guest tool: here every run has all its hooks set, so the loop
writes a file of the test's instead of /sys/bus/pci/rescan, reads a
/proc/lock_stat of the test's (made as lockdep_proc.c prints it), keeps
its state in the test's directory and reads the kernel log and the boot id
from files (HOOKED checks that no run goes without them)."""

import json
import os
import signal
import sys
import time

import pytest

from conftest import CRASHES, REPO, run

HOOKS = ("LABPROBE_RESCAN", "LABPROBE_RESCAN_STATE", "LABPROBE_LOCK_STAT", "LABPROBE_BOOT_ID", "LABPROBE_KMSG")


class Guest:
    """A pretend guest in tmp_path: rescan file, state dir, lock_stat,
    boot id and kernel log."""

    def __init__(self, labprobe, tmp_path):
        self.labprobe = labprobe
        self.dir = tmp_path
        self.rescan = tmp_path / "rescan"
        self.rescan.write_text("0")
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.lock_stat = tmp_path / "lock_stat"
        self.lock_stat.write_text(lock_stat_text([row("pci_rescan_remove_lock", 3, 7, 1.5, 20345.25, 40012.0, 12,
                                                     88, 0.75, 51234.5, 123456.78)]))
        self.boot_id = tmp_path / "boot_id"
        self.boot_id.write_text("1b2c3d4e-0000-4000-8000-000000000001\n")
        self.kmsg = tmp_path / "kmsg"
        self.kmsg.write_text("6,1,1000,-;Linux version 6.1.192-lab-debug\n6,2,2000,-;pciehp: ready\n")
        self.env = dict(os.environ, LABPROBE_RESCAN=str(self.rescan), LABPROBE_RESCAN_STATE=str(self.state),
                        LABPROBE_LOCK_STAT=str(self.lock_stat), LABPROBE_BOOT_ID=str(self.boot_id),
                        LABPROBE_KMSG=str(self.kmsg))
        self.pids = []

    def __call__(self, *args, env=None):
        env = env or self.env
        assert all(env.get(h) for h in HOOKS), "a labprobe run here without its hooks would act on this host"
        r = run([self.labprobe, *args], env=env, timeout=200)
        assert r.returncode not in CRASHES, (r.returncode, r.stderr)
        if r.returncode == 2:
            return 2, None, r.stderr
        rep = json.loads(r.stdout)
        if rep.get("pid"):
            self.pids.append(rep["pid"])
        return r.returncode, rep, r.stderr

    def live(self):
        return json.loads((self.state / "live.json").read_text())

    def cleanup(self):
        """Kills any loop this test started and did not stop (by its pid)."""
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"rescan-loop" in f.read():
                        os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def guest(labprobe, tmp_path):
    g = Guest(labprobe, tmp_path)
    yield g
    g.cleanup()


def alive(pid):
    """Running (a zombie left for an init that does not reap is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


# --- /proc/lock_stat as kernel/locking/lockdep_proc.c (6.1) prints it -------

def _time(us):
    """snprint_time(): ns rounded to 10 ns, printed as us with 2 decimals."""
    ns = round(us * 1000) + 5
    return f"{ns // 1000}.{(ns % 1000) // 10:02d}"


def row(name, con_bounces, contentions, wmin, wmax, wtotal, acq_bounces, acquisitions, hmin, hmax, htotal):
    """A class's row: seq_stats() with seq_lock_time() for wait and hold."""
    def lock_time(nr, lo, hi, total):
        return f"{nr:14d}" + "".join(f" {_time(v):>14}" for v in (lo, hi, total, total / nr if nr else 0))
    return (f"{name:>40}:{con_bounces:14d} " + lock_time(contentions, wmin, wmax, wtotal)
            + f" {acq_bounces:14d} " + lock_time(acquisitions, hmin, hmax, htotal))


def contention_point(name, count, ip, sym):
    return f"{name:>40} {count:14d} {ip:>29} {sym}"


def lock_stat_text(rows, debugging=True):
    head = ["class name", "con-bounces", "contentions", "waittime-min", "waittime-max", "waittime-total",
            "waittime-avg", "acq-bounces", "acquisitions", "holdtime-min", "holdtime-max", "holdtime-total",
            "holdtime-avg"]
    line = "-" * (40 + 1 + 12 * 15)
    out = ["lock_stat version 0.4"]
    if not debugging:
        out.append("*WARNING* lock debugging disabled!! - possibly due to a lockdep warning")
    out += [line, f"{head[0]:>40} " + " ".join(f"{h:>14}" for h in head[1:]), line, ""]
    for r in rows:
        out.append(r)
        name = r[:40].strip()
        out += [" " * (40 - len(name)) + "-" * len(name),
                contention_point(name, 5, "[<000000001234abcd>]", "pciehp_unconfigure_device+0x2e/0x150"),
                contention_point(name, 2, "[<000000001234abce>]", "rescan_store+0x4e/0x90"),
                "", "." * (40 + 1 + 12 * 15), ""]
    return "\n".join(out) + "\n"


def test_lockstat_reads_the_rows_of_the_class(guest):
    """The row of pci_rescan_remove_lock, numbers as the kernel printed them
    (times in us); its contention points below it are not rows; a
    reader-writer class has -W and -R rows; a class not taken since the
    reset has no row: zeros, row false."""
    guest.lock_stat.write_text(lock_stat_text([
        row("&ctrl->reset_lock-W", 0, 0, 0, 0, 0, 1, 4, 1, 2, 3),
        row("&ctrl->reset_lock-R", 0, 2, 3.25, 4.5, 7.75, 1, 9, 1, 2, 3),
        row("pci_rescan_remove_lock", 3, 7, 1.5, 20345.25, 40012.0, 12, 88, 0.75, 51234.5, 123456.78),
        row("pci_rescan_remove_lock_other", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)]))
    rc, rep, _ = guest("lockstat")
    assert rc == 0 and rep["ok"], rep
    ls = rep["lock_stat"]
    assert ls["time_unit"] == "us" and ls["lock_debugging"] is True
    assert ls["classes"] == {"pci_rescan_remove_lock": {
        "con_bounces": 3, "contentions": 7, "waittime_min_us": 1.5, "waittime_max_us": 20345.25,
        "waittime_total_us": 40012.0, "waittime_avg_us": 5716.0, "acq_bounces": 12, "acquisitions": 88,
        "holdtime_min_us": 0.75, "holdtime_max_us": 51234.5, "holdtime_total_us": 123456.78,
        "holdtime_avg_us": 1402.92}}

    rc, rep, _ = guest("lockstat", "&ctrl->reset_lock", "pci_lock_never_taken")
    assert rc == 0, rep
    classes = rep["lock_stat"]["classes"]
    assert set(classes) == {"&ctrl->reset_lock-W", "&ctrl->reset_lock-R", "pci_lock_never_taken"}
    assert classes["&ctrl->reset_lock-R"]["contentions"] == 2 and classes["&ctrl->reset_lock-R"]["waittime_total_us"] == 7.75
    assert classes["pci_lock_never_taken"]["row"] is False and classes["pci_lock_never_taken"]["acquisitions"] == 0


def test_lockstat_says_when_lockdep_turned_itself_off(guest):
    guest.lock_stat.write_text(lock_stat_text([row("pci_rescan_remove_lock", 0, 0, 0, 0, 0, 1, 1, 1, 1, 1)],
                                              debugging=False))
    rc, rep, _ = guest("lockstat")
    assert rc == 0 and rep["lock_stat"]["lock_debugging"] is False


def test_lockstat_reset_and_a_kernel_without_lock_stat(guest):
    text = guest.lock_stat.read_text()
    rc, rep, _ = guest("lockstat", "--reset")
    assert rc == 0 and rep["reset"] is True and rep["lock_stat"]["classes"]["pci_rescan_remove_lock"]["acquisitions"] == 88
    assert guest.lock_stat.read_text() == "0\n" != text, "--reset writes 0 to lock_stat after reading it"
    env = dict(guest.env, LABPROBE_LOCK_STAT=str(guest.dir / "no-lock-stat"))
    rc, rep, _ = guest("lockstat", env=env)
    assert rc == 1 and rep["ok"] is False and rep["lock_stat"] is None
    assert "CONFIG_LOCK_STAT" in rep["error"]


@pytest.mark.parametrize("args, option", [
    (["rescan-loop", "start", "--interval-ms", "abc"], "--interval-ms"),
    (["rescan-loop", "start", "--interval-ms", "0"], "--interval-ms"),
    (["rescan-loop", "start", "--interval-ms", "5x"], "--interval-ms"),
    (["rescan-loop", "start", "--bogus"], "--bogus"),
    (["rescan-loop", "stop", "--timeout", "-1"], "--timeout"),
    (["rescan-loop", "stop", "--class", "has space"], "--class"),
    (["rescan-loop", "stop", "--class", "x" * 65], "--class"),
    (["rescan-loop", "restart"], "restart"),
    (["rescan-loop"], "start or stop"),
    (["lockstat", "--bogus"], "--bogus"),
    (["lockstat", "bad\tname"], "CLASS"),
])
def test_bad_arguments_are_refused_before_anything(guest, args, option):
    rc, rep, err = guest(*args)
    assert rc == 2 and option in err, err
    assert not list(guest.state.iterdir()) and guest.rescan.read_text() == "0"


def test_the_loop_rescans_until_stopped_and_reports_its_window(guest):
    """start: lock_stat zeroed, a detached process in its own session that
    writes 1 to the rescan file every 20 ms; stop: it ends, its counts,
    ran_ms, the lock_stat rows and the kernel log findings since start."""
    rc, rep, _ = guest("rescan-loop", "start", "--interval-ms", "20")
    assert rc == 0 and rep["ok"] and rep["interval_ms"] == 20 and rep["lock_stat_reset"] is True, rep
    assert rep["kmsg_seq"] == 2
    pid = rep["pid"]
    assert alive(pid) and os.getsid(pid) != os.getsid(0), "the loop runs detached, in its own session"
    assert guest.lock_stat.read_text() == "0\n"
    time.sleep(0.6)
    assert guest.rescan.read_text() == "1" and guest.live()["rescans"] >= 5
    # the kernel since start: a lockdep report is the loop window's finding
    guest.lock_stat.write_text(lock_stat_text([row("pci_rescan_remove_lock", 0, 4, 2, 30, 50, 3, 40, 1, 900,
                                                   2000)]))
    with guest.kmsg.open("a") as f:
        f.write("4,3,3000,-;WARNING: possible circular locking dependency detected\n")
    rc, rep, _ = guest("rescan-loop", "stop")
    assert not alive(pid)
    assert rep["state"] == "stopped" and rep["running_at_stop"] is True and rep["errors"] == 0, rep
    assert rep["rescans"] >= 10 and 500 <= rep["ran_ms"] < 60000
    assert rep["rescan_ms"]["max"] >= rep["rescan_ms"]["mean"] > 0
    assert rep["lock_stat"]["classes"]["pci_rescan_remove_lock"]["contentions"] == 4
    assert [f["kind"] for f in rep["findings"]] == ["lockdep"] and rc == 1 and rep["ok"] is False
    assert not list(guest.state.glob("*.json")), "stop leaves no state behind"
    rc, rep, _ = guest("rescan-loop", "stop")
    assert rc == 1 and rep["state"] == "none" and rep["running_at_stop"] is False and rep["rescans"] is None


def test_a_clean_window_stops_with_exit_0(guest):
    rc, rep, _ = guest("rescan-loop", "start", "--interval-ms", "10", "--keep-lock-stat")
    assert rc == 0 and rep["lock_stat_reset"] is False and guest.lock_stat.read_text() != "0\n"
    time.sleep(0.2)
    rc, rep, _ = guest("rescan-loop", "stop")
    assert rc == 0 and rep["ok"] and rep["findings"] == [] and rep["rescans"] > 0, rep


def test_start_on_a_kernel_without_lock_stat(guest):
    env = dict(guest.env, LABPROBE_LOCK_STAT=str(guest.dir / "no-lock-stat"))
    rc, rep, _ = guest("rescan-loop", "start", env=env)
    assert rc == 0 and rep["lock_stat_reset"] is None and rep["lock_stat"] is None
    rc, rep, _ = guest("rescan-loop", "stop", env=env)
    assert rc == 0 and rep["lock_stat"] is None and "CONFIG_LOCK_STAT" in rep["lock_stat_note"]


def test_start_replaces_a_loop_still_running(guest):
    rc, first, _ = guest("rescan-loop", "start", "--interval-ms", "10")
    time.sleep(0.2)
    rc, rep, _ = guest("rescan-loop", "start", "--interval-ms", "10")
    assert rc == 0 and rep["replaced"]["stopped"] is True and rep["replaced"]["rescans"] > 0
    assert rep["pid"] != first["pid"] and not alive(first["pid"]) and alive(rep["pid"])
    rc, rep, _ = guest("rescan-loop", "stop")
    assert rc == 0 and rep["state"] == "stopped"


def test_stop_after_a_reboot_says_so(guest):
    """The loop's state of another boot (its boot id): the loop and the
    kernel's statistics went with that boot; stop says so, exit 1."""
    rc, rep, _ = guest("rescan-loop", "start", "--interval-ms", "50")
    pid = rep["pid"]
    guest.boot_id.write_text("1b2c3d4e-0000-4000-8000-000000000002\n")
    rc, rep, _ = guest("rescan-loop", "stop")
    assert rc == 1 and rep["state"] == "rebooted" and rep["rebooted"] is True and rep["running_at_stop"] is False
    assert rep["rescans"] is None and rep["lock_stat"] is None and "rebooted" in rep["note"]
    assert alive(pid), "a loop of another boot is not this boot's to stop"
    # a real reboot takes the loop and /run with it; here the test does
    os.kill(pid, signal.SIGKILL)
    while alive(pid):
        time.sleep(0.01)
    (guest.state / "live.json").unlink()
    rc, rep, _ = guest("rescan-loop", "stop")
    assert rep["state"] == "none" and rep["rebooted"] is False


def test_a_loop_that_died_and_write_errors_fail_the_stop(guest):
    rc, rep, _ = guest("rescan-loop", "start", "--interval-ms", "10")
    time.sleep(0.2)
    os.kill(rep["pid"], signal.SIGKILL)
    time.sleep(0.1)
    rc, rep, _ = guest("rescan-loop", "stop")
    assert rc == 1 and rep["state"] == "died" and rep["running_at_stop"] is False and rep["rescans"] > 0
    assert "gone before stop" in rep["note"]

    target = guest.dir / "bus" / "rescan"
    target.parent.mkdir()
    target.write_text("0")
    env = dict(guest.env, LABPROBE_RESCAN=str(target))
    rc, rep, _ = guest("rescan-loop", "start", "--interval-ms", "10", env=env)
    assert rc == 0
    time.sleep(0.1)
    target.unlink()
    target.parent.rmdir()
    time.sleep(0.2)
    rc, rep, _ = guest("rescan-loop", "stop", env=env)
    assert rc == 1 and rep["state"] == "stopped" and rep["errors"] > 0
    assert "No such file or directory" in rep["last_error"]
    rc, rep, _ = guest("rescan-loop", "start", env=env)
    assert rc == 1 and "cannot write" in rep["error"], "no loop when the rescan file cannot be written"


# --- the record (lab/plugins/filter/lab_rescan.py) ---------------------------

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_rescan  # noqa: E402


def step(rep, rc=0):
    return {"rc": rc, "stdout": json.dumps(rep), "stderr": ""}


def ls_row(contentions, wmin, wmax, wtotal, acquisitions, hmin, hmax, htotal):
    return {"con_bounces": 1, "contentions": contentions, "waittime_min_us": wmin, "waittime_max_us": wmax,
            "waittime_total_us": wtotal, "waittime_avg_us": round(wtotal / contentions, 2) if contentions else 0,
            "acq_bounces": 2, "acquisitions": acquisitions, "holdtime_min_us": hmin, "holdtime_max_us": hmax,
            "holdtime_total_us": htotal, "holdtime_avg_us": round(htotal / acquisitions, 2) if acquisitions else 0}


def stop_rep(rescans, ran_ms, row, findings=(), state="stopped", errors=0, debugging=True):
    return {"ok": not findings and not errors, "state": state, "running_at_stop": state == "stopped",
            "rescans": rescans, "errors": errors, "ran_ms": ran_ms, "last_error": None,
            "rescan_ms": {"max": 40.0, "total": rescans * 2.0, "mean": 2.0},
            "lock_stat": {"time_unit": "us", "lock_debugging": debugging,
                          "classes": {"pci_rescan_remove_lock": row}},
            "findings": list(findings)}


START = step({"ok": True, "pid": 321, "interval_ms": 200, "lock_stat_reset": True, "kmsg_seq": 10})
RECORD = {"name": "jbof-yank", "vm": "dbg-1", "variant": "debug", "status": "pass", "iterations": 1,
          "failures": 0, "seconds": 600, "metrics": {}, "findings": []}


def test_segments_of_a_restart_add_up():
    """jbof-yank stops the loop before its VM restart and starts it again
    after: counts and lock statistics of both boots add up, minima and
    maxima are over both, averages are recomputed."""
    segs = [{"start": START, "stop": step(stop_rep(100, 20000.0, ls_row(4, 2.0, 900.0, 1000.0, 50, 1.0, 5000.0,
                                                                          9000.0))), "ended_by": "restart"},
            {"start": START, "stop": step(stop_rep(50, 10000.5, ls_row(1, 0.5, 10.0, 10.0, 30, 3.0, 700.0, 1000.0))),
             "ended_by": "scenario end"}]
    rec = lab_rescan.lab_rescan_merge(RECORD, segs)
    assert rec["status"] == "pass" and rec["findings"] == []
    loop = rec["rescan_loop"]
    assert loop["rescans"] == 150 and loop["errors"] == 0 and loop["ran_ms"] == 30000.5
    assert loop["running_at_stop"] is True and loop["interval_ms"] == 200
    assert [s["ended_by"] for s in loop["segments"]] == ["restart", "scenario end"]
    assert loop["rescan_ms"] == {"max": 40.0, "mean": 2.0}
    row = rec["lock_stat"]["classes"]["pci_rescan_remove_lock"]
    assert row["contentions"] == 5 and row["acquisitions"] == 80
    assert (row["waittime_min_us"], row["waittime_max_us"], row["waittime_total_us"], row["waittime_avg_us"]) == \
        (0.5, 900.0, 1010.0, 202.0)
    assert (row["holdtime_min_us"], row["holdtime_max_us"], row["holdtime_total_us"], row["holdtime_avg_us"]) == \
        (1.0, 5000.0, 10000.0, 125.0)
    assert rec["lock_stat"]["lock_debugging"] is True and rec["lock_stat"]["segments"] == 2


def test_the_loops_findings_fail_the_record_once():
    """A kernel report of the loop's window that the scenario reported too
    is not repeated; one it did not is added and fails the record; a loop
    that died, a write that failed, a rescan stuck in the kernel are
    findings of kind rescan-loop."""
    splat = {"kind": "lockdep", "line": "WARNING: possible circular locking dependency detected", "context": []}
    kasan = {"kind": "kasan", "line": "BUG: KASAN: use-after-free in pci_dev_set_disconnected+0x1c/0x60",
             "context": []}
    rec = dict(RECORD, status="fail", failures=1, findings=[splat])
    out = lab_rescan.lab_rescan_merge(rec, [{"start": START, "stop": step(stop_rep(9, 1.0, None, [splat, kasan]),
                                                                          rc=1)}])
    assert [f["kind"] for f in out["findings"]] == ["lockdep", "kasan"] and out["status"] == "fail"

    died = stop_rep(3, 1.0, None, state="died")
    died["note"] = "the loop was gone before stop"
    stuck = dict(stop_rep(3, 1.0, None), state="stuck", stuck=True, in_rescan_ms=125000.0)
    for stop, words in ((died, "not running at its stop (died)"), (stuck, "blocked in the kernel for 125000.0 ms"),
                        (stop_rep(3, 1.0, None, errors=2), "2 write(s) to /sys/bus/pci/rescan failed")):
        out = lab_rescan.lab_rescan_merge(RECORD, [{"start": START, "stop": step(stop, rc=1)}])
        assert out["status"] == "fail" and out["failures"] == 1
        assert [f["kind"] for f in out["findings"]] == ["rescan-loop"] and words in out["findings"][0]["line"], out
    out = lab_rescan.lab_rescan_merge(RECORD, [{"start": step({"ok": False, "error": "cannot write x"}, rc=1),
                                                "stop": {"skipped": True}}])
    assert out["findings"][0]["line"] == "the rescan loop did not start: cannot write x"
    out = lab_rescan.lab_rescan_merge(RECORD, [{"start": START, "stop": {"rc": 1, "stdout": "", "stderr": "boom"}}])
    assert out["status"] == "fail" and "no JSON from labprobe" in out["findings"][0]["line"]


def test_no_lock_stat_on_a_kernel_without_it():
    stop = dict(stop_rep(5, 1000.0, None), lock_stat=None,
                lock_stat_note="cannot read /proc/lock_stat: No such file or directory (a kernel without "
                               "CONFIG_LOCK_STAT)")
    out = lab_rescan.lab_rescan_merge(RECORD, [{"start": START, "stop": step(stop)}])
    assert out["status"] == "pass" and out["lock_stat"] is None and "CONFIG_LOCK_STAT" in out["lock_stat_note"]
    assert out["rescan_loop"]["rescans"] == 5


# --- in the shared lab VM -----------------------------------------------------

def test_the_loop_really_rescans(lab_vm):
    """The last drive of the shared lab VM removed through sysfs (no hotplug
    event: nothing but a rescan brings it back) comes back, bound to nvme,
    while the loop runs; the patched kernel has no lock statistics."""
    script = r"""
set -e
a=$(cat /sys/bus/pci/slots/4/address).0
echo 1 > /sys/bus/pci/devices/$a/remove
test ! -e /sys/bus/pci/devices/$a
labprobe rescan-loop start --interval-ms 100 >/tmp/rescan-start.json
i=0
while [ ! -e /sys/bus/pci/devices/$a/driver ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
readlink /sys/bus/pci/devices/$a/driver
labprobe rescan-loop stop || true
"""
    rc, out, err = lab_vm.agent(script, timeout=180)
    assert rc == 0, (out, err)
    lines = out.strip().splitlines()
    assert lines[0].endswith("/nvme"), out
    rep = json.loads(lines[-1])
    assert rep["state"] == "stopped" and rep["running_at_stop"] is True, rep
    assert rep["rescans"] >= 1 and rep["errors"] == 0 and rep["findings"] == [], rep
    assert rep["lock_stat"] is None and "CONFIG_LOCK_STAT" in rep["lock_stat_note"]
