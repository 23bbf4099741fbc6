"""labprobe log-window (lab/tools/labprobe/logwindow.c), without a VM: the
end of a scenario's window counts the records no scan of the window
covered and reports every finding of the window, and the canary is written at the scan it was armed for, found in
that scan's window, and written at the end when the scenario scanned less.

The kernel log is a file of records (LABPROBE_KMSG), the boot id a file
(LABPROBE_BOOT_ID), the window's state a directory (LABPROBE_LOG_STATE):
nothing here reads or writes this host's log or /run."""

import json
import os

import pytest

from conftest import CRASHES, run



class Guest:
    """A stand-in guest: its log, boot id and labprobe state in tmp_path."""

    def __init__(self, labprobe, tmp_path):
        self.labprobe, self.kmsg, self.boot = labprobe, tmp_path / "kmsg", tmp_path / "boot_id"
        self.env = dict(os.environ, LABPROBE_KMSG=str(self.kmsg), LABPROBE_BOOT_ID=str(self.boot),
                        LABPROBE_LOG_STATE=str(tmp_path / "state"),
                        LABPROBE_LOCKDEP_STATS=str(tmp_path / "no-lockdep_stats"))
        self.kmsg.write_text("")
        self.boot.write_text("boot-1\n")
        self.seq = 0

    def log(self, *messages):
        with self.kmsg.open("a") as f:
            for m in messages:
                self.seq += 1
                f.write(f"6,{self.seq},{self.seq * 1000},-;{m}\n")

    def reboot(self):
        self.kmsg.write_text("")
        self.boot.write_text("boot-2\n")
        self.seq = 0

    def probe(self, *args):
        r = run([self.labprobe, *args], env=self.env, timeout=30)
        assert r.returncode not in CRASHES, (r.returncode, r.stderr)
        rep = json.loads(r.stdout) if r.returncode != 2 else None
        return r.returncode, rep, r.stderr

    def last_seq(self):
        return self.seq


def lines(rep):
    return [f["line"] for f in rep["findings"]]


def test_end_scans_only_what_no_scan_covered(labprobe, tmp_path):
    g = Guest(labprobe, tmp_path)
    g.log("Linux version 6.1.0-labtest", "WARNING: CPU: 0 PID: 1 at boot.c:1 at boot")
    # the boot's first window starts at its first record: the boot is in it
    rc, start, _ = g.probe("log-window", "start")
    assert rc == 0 and start["since_seq"] == 0 and start["chained"] is False and start["boot_id"] == "boot-1"
    # a collect's window (arm at seq 2): it finds the BUG, a finding of its own
    g.log("pcieport 0000:00:01.0: pciehp: Slot(1): Card not present", "BUG: unable to handle page fault")
    rc, rep, _ = g.probe("findings", "--since-seq", "2")
    assert rc == 1 and lines(rep) == ["BUG: unable to handle page fault"]
    # the re-add and verify after it: nobody scans these
    g.log("nvme nvme0: pci function 0000:01:00.0", "WARNING: CPU: 1 PID: 77 at drivers/nvme/host/core.c:1")
    rc, end, _ = g.probe("log-window", "end", "--since-seq", "0", "--boot-id", "boot-1")
    # every finding of the window (the collect's BUG again: a finding its
    # caller dropped is not lost), and the 4 records no step scanned counted
    assert rc == 1 and lines(end) == ["WARNING: CPU: 0 PID: 1 at boot.c:1 at boot",
                                      "BUG: unable to handle page fault",
                                      "WARNING: CPU: 1 PID: 77 at drivers/nvme/host/core.c:1"]
    assert end["unscanned_records"] == 4 and end["scans"] == 1 and end["restarted"] is False
    assert end["covered"] == {"boot_id": "boot-1", "after_seq": 0, "from_boot": True, "last_seq": 6}
    # the window is closed: a later scan is not noted, and the next window
    # starts where this one closed
    rc, _, _ = g.probe("findings", "--since-seq", "6")
    rc, start, _ = g.probe("log-window", "start")
    assert start["since_seq"] == 6 and start["chained"] is True
    rc, end, _ = g.probe("log-window", "end", "--since-seq", str(start["since_seq"]), "--boot-id", "boot-1")
    assert rc == 0 and end["findings"] == [] and end["unscanned_records"] == 0


def test_records_between_two_windows_are_the_next_windows(labprobe, tmp_path):
    """What the lab does between two scenarios (a module loaded, a VM
    checked) is judged in the next scenario's window; what follows the last
    one in the run's own window (after): every record in exactly one."""
    g = Guest(labprobe, tmp_path)
    g.log("Linux version 6.1.0-labtest")
    rc, start, _ = g.probe("log-window", "start")
    rc, end, _ = g.probe("log-window", "end", "--since-seq", str(start["since_seq"]), "--boot-id", "boot-1")
    assert rc == 0 and end["covered"]["last_seq"] == 1
    g.log("WARNING: CPU: 0 PID: 9 at lib/x.c:1 between the windows")
    rc, start, _ = g.probe("log-window", "start")
    assert start["since_seq"] == 1
    g.log("nvme nvme0: 4/0/0 default/read/poll queues")
    rc, end, _ = g.probe("log-window", "end", "--since-seq", str(start["since_seq"]), "--boot-id", "boot-1")
    assert rc == 1 and lines(end) == ["WARNING: CPU: 0 PID: 9 at lib/x.c:1 between the windows"]
    assert end["covered"] == {"boot_id": "boot-1", "after_seq": 1, "from_boot": False, "last_seq": 3}
    g.log("BUG: kernel NULL pointer dereference, address: 0000000000000008")
    rc, rest, _ = g.probe("log-window", "after")
    assert rc == 1 and lines(rest) == ["BUG: kernel NULL pointer dereference, address: 0000000000000008"]
    assert rest["covered"] == {"boot_id": "boot-1", "after_seq": 3, "from_boot": False, "last_seq": 4}
    rc, rest, _ = g.probe("log-window", "after")
    assert rc == 0 and rest["findings"] == [] and rest["covered"]["after_seq"] == 4
    # a new boot's first window starts at its first record
    g.reboot()
    g.log("Linux version 6.1.0-labtest", "WARNING: CPU: 0 PID: 1 at boot.c:1 at boot")
    rc, start, _ = g.probe("log-window", "start")
    assert start["since_seq"] == 0 and start["chained"] is False and start["boot_id"] == "boot-2"


def test_a_canary_armed_for_scan_0_is_written_at_the_start(labprobe, tmp_path):
    g = Guest(labprobe, tmp_path)
    g.log("Linux version 6.1.0-labtest")
    rc, start, _ = g.probe("log-window", "start", "--canary", "0", "--token", "smoke-0")
    assert rc == 0 and start["canary_at_scan"] == 0
    rc, end, _ = g.probe("log-window", "end", "--since-seq", str(start["since_seq"]), "--boot-id", "boot-1",
                         "--token", "smoke-0")
    assert rc == 1 and end["canary"]["fired_at"] == "start"
    assert lines(end) == [end["canary"]["line"]]


@pytest.mark.parametrize("stats, state", [
    (None, None),
    (" lock-classes:                         1612 [max: 8192]\n debug_locks:                            1\n", "on"),
    (" lock-classes:                         1612 [max: 8192]\n debug_locks:                            0\n", "off"),
    (" lock-classes:                         1612 [max: 8192]\n", None),
])
def test_both_ends_say_whether_lockdep_is_on(labprobe, tmp_path, stats, state):
    """/proc/lockdep_stats' debug_locks (a stand-in file): "on", "off", or
    null on a kernel without lockdep (no file) or without the line."""
    g = Guest(labprobe, tmp_path)
    g.env["LABPROBE_LOCKDEP_STATS"] = str(tmp_path / "lockdep_stats")
    if stats is not None:
        (tmp_path / "lockdep_stats").write_text(stats)
    g.log("Linux version 6.1.0-labtest")
    rc, start, _ = g.probe("log-window", "start")
    assert rc == 0 and start["lockdep"] == state
    rc, end, _ = g.probe("log-window", "end", "--since-seq", str(start["since_seq"]), "--boot-id", "boot-1")
    assert rc == 0 and end["lockdep"] == state


def test_a_clean_window_with_its_gaps_scanned_is_clean(labprobe, tmp_path):
    g = Guest(labprobe, tmp_path)
    g.log("Linux version 6.1.0-labtest")
    _, start, _ = g.probe("log-window", "start")
    g.log("nvme nvme0: 4/0/0 default/read/poll queues", "pcieport: pciehp: Slot(1): Link Up")
    assert g.probe("findings", "--since-seq", "1")[0] == 0
    g.log("nvme nvme1: 4/0/0 default/read/poll queues")
    rc, end, _ = g.probe("log-window", "end", "--since-seq", "1", "--boot-id", "boot-1")
    assert rc == 0 and end["unscanned_records"] == 1 and end["findings"] == []


@pytest.mark.parametrize("k, scans, fired_at", [(1, 2, "scan-1"), (2, 2, "scan-2"), (3, 2, "end")])
def test_canary_fires_at_its_scan_and_is_found_there(labprobe, tmp_path, k, scans, fired_at):
    """Armed for the k-th scan of the window: that scan finds it (in its
    own window, since it is written before the scan reads), and no other
    finding; with fewer scans than k the end writes and finds it."""
    g = Guest(labprobe, tmp_path)
    g.log("Linux version 6.1.0-labtest")
    rc, start, _ = g.probe("log-window", "start", "--canary", str(k), "--token", "tok42")
    assert rc == 0 and start["canary_at_scan"] == k
    found = []
    for i in range(scans):
        since = g.last_seq()
        g.log(f"pcieport: pciehp: Slot({i}): Card not present")
        rc, rep, _ = g.probe("findings", "--since-seq", str(since))
        g.seq = rep["kmsg_last_seq"]  # the canary took a sequence number
        found += [(i + 1, line) for line in lines(rep)]
    rc, end, _ = g.probe("log-window", "end", "--since-seq", "1", "--boot-id", "boot-1", "--token", "tok42")
    assert end["canary"]["fired_at"] == fired_at
    canary = end["canary"]["line"]
    assert canary.startswith("WARNING: lab-canary tok42")
    # the scan it was armed for found it (end finds the whole window's
    # findings again: the record keeps each once)
    assert found == ([(k, canary)] if k <= scans else [])
    assert lines(end) == [canary]


def test_canary_lost_with_a_restart_is_written_at_the_end(labprobe, tmp_path):
    """A VM restarted inside the window: /run is gone with the canary and
    the noted scans; end says so, writes the canary and scans the new
    boot's log."""
    g = Guest(labprobe, tmp_path)
    g.log("Linux version 6.1.0-labtest", "x", "y")
    _, start, _ = g.probe("log-window", "start", "--canary", "5", "--token", "tok7")
    (tmp_path / "state").joinpath("canary").unlink()  # what a reboot does to /run
    (tmp_path / "state").joinpath("scanned").unlink(missing_ok=True)
    g.reboot()
    g.log("Linux version 6.1.0-labtest", "BUG: KASAN: use-after-free in nvme_remove")
    rc, end, _ = g.probe("log-window", "end", "--since-seq", "3", "--boot-id", "boot-1", "--token", "tok7")
    assert rc == 1 and end["restarted"] is True and end["canary"]["fired_at"] == "end"
    assert lines(end) == ["BUG: KASAN: use-after-free in nvme_remove", end["canary"]["line"]]


@pytest.mark.parametrize("kind", ["lockdep", "kasan", "sleep-in-atomic"])
def test_provoked_canary_asks_lab_provoke_at_its_scan(labprobe, tmp_path, kind):
    """With --provoke the canary is no marked line: at its scan labprobe
    writes "KIND TOKEN" to lab_provoke's debugfs file (here a file), and
    the kernel's own report is what the scan must find; end says which
    kind was provoked and has no marked line to look for."""
    g = Guest(labprobe, tmp_path)
    provoke = tmp_path / "provoke"
    provoke.write_text("")
    g.env["LABPROBE_PROVOKE"] = str(provoke)
    g.log("Linux version 6.1.0-debug")
    rc, start, _ = g.probe("log-window", "start", "--canary", "2", "--token", "tok9", "--provoke", kind)
    assert rc == 0 and start["canary_provoke"] == kind
    g.probe("findings", "--since-seq", "1")
    assert provoke.read_text() == "", "provoked before its scan"
    g.probe("findings", "--since-seq", "1")
    assert provoke.read_text() == f"{kind} tok9\n"
    rc, end, _ = g.probe("log-window", "end", "--since-seq", "1", "--boot-id", "boot-1",
                         "--token", "tok9", "--provoke", kind)
    assert end["canary"] == {"fired_at": "scan-2", "line": None, "provoke": kind}
    # no marked line went into the log: only the kernel's report could fail the scenario
    assert "lab-canary" not in g.kmsg.read_text()


def test_provoked_canary_without_the_module_is_not_fired(labprobe, tmp_path):
    """No lab_provoke loaded (no debugfs file): the canary is not written,
    end reports fired_at null, and a test of the gate fails on that."""
    g = Guest(labprobe, tmp_path)
    g.env["LABPROBE_PROVOKE"] = str(tmp_path / "absent" / "provoke")
    g.log("Linux version 6.1.0-debug")
    g.probe("log-window", "start", "--canary", "1", "--token", "tok3", "--provoke", "kasan")
    g.probe("findings", "--since-seq", "1")
    rc, end, _ = g.probe("log-window", "end", "--since-seq", "1", "--boot-id", "boot-1",
                         "--token", "tok3", "--provoke", "kasan")
    assert end["canary"]["fired_at"] is None


@pytest.mark.parametrize("args, needle", [
    (["start", "--canary", "2"], "--canary and --token go together"),
    (["start", "--canary", "1", "--token", "t", "--provoke", "oops"], "--provoke: lockdep, kasan or sleep-in-atomic"),
    (["start", "--provoke", "kasan"], "--provoke needs --canary and --token"),
    (["end", "--since-seq", "3", "--boot-id", "b", "--provoke", "kasan"], "--provoke needs --token"),
    (["start", "--canary", "-1", "--token", "t"], "--canary"),
    (["start", "--token", "a b", "--canary", "1"], "--token"),
    (["end", "--since-seq", "3"], "needs --since-seq and --boot-id"),
    (["middle"], "log-window start | end | after"),
])
def test_bad_arguments_name_what_to_fix(labprobe, tmp_path, args, needle):
    g = Guest(labprobe, tmp_path)
    rc, _, err = g.probe("log-window", *args)
    assert rc == 2 and needle in err
