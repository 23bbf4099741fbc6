"""arm's fio supervisor (lab/tools/labprobe/fio.c) without a VM: the end it
records for a job is when fio itself closed the drive with its error, not
when some other process closed the node (issue 36: since the supervisor
slept on inotify, bulk yanks reported fio's I/O error 1.3 to 28 s before
the first pciehp interrupt).

`labprobe supervise` runs the supervisor in the foreground with its test
hooks: LABPROBE_DEV names a directory of plain files standing for the
drives' nodes, LABPROBE_SYS_BLOCK one of NS/stat files, and the fio it
starts is a fake one first in PATH, which opens its "drive", counts I/O in
its stat file and then sees its error. Nothing here opens a real device or
runs fio. collect then turns the recorded end into the fio_error phase
(LABPROBE_TRACE, as in test_labprobe_breakdown.py)."""

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import CRASHES, run

NS = "nvmelabtestfio1n1"
ERROR_AFTER_S = 1.5     # fio's I/O error this long after the other opener's close

# A fake fio: one job on --filename, mapped into LABPROBE_DEV. It sizes the
# drive (open and close, as fio does), opens it for the job and does I/O.
# Then, per FAKE_FIO_PLAN:
#   udev: a pass ends (a time_based job with verify closes and reopens its
#     file every pass) and udev, woken by the close of a write, opens the
#     node and closes it again, all while the supervisor waits for a CPU
#     (stopped): inotify merges the two opens, so that counting opens and
#     closes finds the node closed while the job still holds it;
#   holder: a process that had the node open before the supervisor started
#     (udev probing a drive just added) closes it.
# ERROR_AFTER_S later the job sees its I/O error: it writes the time to
# error_at, closes the drive and, a second later, fio reports error 5.
FAKE_FIO = r'''#!{python}
import json, os, signal, subprocess, sys, time

args = sys.argv[1:]
val = lambda k: [a.split("=", 1)[1] for a in args if a.startswith(k + "=")]
name, node = val("--name")[0], os.path.join(os.environ["LABPROBE_DEV"], os.path.basename(val("--filename")[0]))
stat = os.path.join(os.environ["LABPROBE_SYS_BLOCK"], os.path.basename(node), "stat")
work = os.environ["FAKE_FIO_WORK"]
ios = 0


def io_for(seconds):
    global ios
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ios += 8
        with open(stat, "w") as f:
            f.write(f"{{ios}} 0 0 0 0 0 0 0 0 0 0\n")
        time.sleep(0.01)


def state(pid):
    with open(f"/proc/{{pid}}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


os.close(os.open(node, os.O_RDWR))          # sizing
fd = os.open(node, os.O_RDWR)               # the job
io_for(0.6)
if os.environ["FAKE_FIO_PLAN"] == "udev":
    sup = os.getppid()
    os.kill(sup, signal.SIGSTOP)
    while state(sup) != "T":
        time.sleep(0.001)
    os.close(fd)                            # the pass ends ...
    fd = os.open(node, os.O_RDWR)           # ... and the next begins
    subprocess.run([sys.executable, "-c", f"import os; os.close(os.open({{node!r}}, os.O_RDONLY))"], check=True)
    os.kill(sup, signal.SIGCONT)
else:
    open(os.path.join(work, "release"), "w").close()
    while not os.path.exists(os.path.join(work, "released")):
        time.sleep(0.005)
io_for({error_after})
with open(os.path.join(work, "error_at"), "w") as f:
    f.write(f"{{time.monotonic():.6f}}\n")
os.close(fd)
time.sleep(1.0)
with open(val("--output")[0], "w") as f:
    json.dump({{"jobs": [{{"jobname": name, "error": 5}}]}}, f)
sys.exit(1)
'''

HOLDER = r'''
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
open(sys.argv[2] + "/held", "w").close()
while not os.path.exists(sys.argv[2] + "/release"):
    time.sleep(0.005)
os.close(fd)
open(sys.argv[2] + "/released", "w").close()
'''


def trace_line(comm, pid, ts, event, args=""):
    """One line of tracefs's trace (clock mono, printed in us)."""
    return f"{comm + '-' + str(pid):>22} [001] d..1. {ts:12.6f}: {event}: (func+0x0/0x10){args}\n"


@pytest.mark.parametrize("plan", ["udev", "holder"])
def test_fio_end_is_the_jobs_own_close(labprobe, tmp_path, plan):
    """Another process's opens and closes of the drive's node do not end
    the job: its end is recorded when fio closed the drive with its error
    (within 0.3 s), and collect's fio_error is after the yank's interrupt."""
    for d in ("dev", "sys", "bin", "work", f"sys/{NS}"):
        (tmp_path / d).mkdir()
    node = tmp_path / "dev" / NS
    node.write_text("")
    (tmp_path / "sys" / NS / "stat").write_text("0 0 0 0 0 0 0 0 0 0 0\n")
    fio = tmp_path / "bin" / "fio"
    fio.write_text(FAKE_FIO.format(python=sys.executable, error_after=ERROR_AFTER_S))
    fio.chmod(0o755)
    work = tmp_path / "work"
    slot = {"slot": "1", "bus": 0xe1, "port": "0000:00:02.0", "irqs": [24], "ctrls": ["nvmelabtestfio1"],
            "namespaces": [NS], "fio": True}
    assert not any(d.startswith("0000:e1:") for d in os.listdir("/sys/bus/pci/devices")), \
        "the test's bus number exists on this host"
    (tmp_path / "state.json").write_text(json.dumps({
        "slots": [slot], "kmsg_seq": 0, "tracepoints": False, "armed_at": time.monotonic(),
        "probes": {}, "breakdown": {"threads": []}}))
    env = dict(os.environ, LABPROBE_DEV=str(tmp_path / "dev"), LABPROBE_SYS_BLOCK=str(tmp_path / "sys"),
               PATH=f"{tmp_path / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}", FAKE_FIO_PLAN=plan,
               FAKE_FIO_WORK=str(work))

    holder = None
    if plan == "holder":
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(node), str(work)])
        for _ in range(500):
            if (work / "held").exists():
                break
            time.sleep(0.01)
        assert (work / "held").exists(), "the holder did not open the node"
    try:
        r = run([labprobe, "supervise", "--dir", str(tmp_path), "--fio-runtime", "30"], env=env, timeout=60)
    finally:
        if holder:
            holder.kill()
            holder.wait()
    assert r.returncode not in CRASHES, (r.returncode, r.stderr)
    assert r.returncode == 0, (r.stdout, r.stderr)
    job = json.loads(r.stdout)["jobs"][0]
    assert (tmp_path / "fio.done").exists()
    assert job["exit"] == 5, job
    error_at = float((work / "error_at").read_text())
    late = job["end"] - error_at
    assert 0 <= late < 0.3, f"end recorded {late * 1e3:.0f} ms after fio's error (negative: before it)"

    # collect: the yank's first interrupt 30 ms before fio saw its error
    (tmp_path / "trace").write_text("# tracer: nop\n#\n" + trace_line("<idle>", 0, error_at - 0.030, "lp_isr",
                                                                       " irq=24"))
    (tmp_path / "kmsg").write_text("6,1,1000,-;Linux version 6.1.0-labtest\n")
    env = dict(os.environ, LABPROBE_TRACE=str(tmp_path / "trace"), LABPROBE_KMSG=str(tmp_path / "kmsg"))
    r = run([labprobe, "collect", "--dir", str(tmp_path), "--expect-gone", "1", "--timeout", "0",
             "--fio-timeout", "0"], env=env, timeout=30)
    assert r.returncode not in CRASHES, (r.returncode, r.stderr)
    got = json.loads(r.stdout)["slots"][0]
    assert got["fio_rc"] == 5, got
    assert 30 <= got["ms"]["fio_error"] < 330, got["ms"]


def test_supervise_needs_its_test_hook(labprobe, tmp_path):
    """supervise runs fio on the drives it is given: without LABPROBE_DEV
    it refuses (exit 2) before it reads anything or starts fio."""
    env = {k: v for k, v in os.environ.items() if k != "LABPROBE_DEV"}
    r = run([labprobe, "supervise", "--dir", str(tmp_path)], env=env, timeout=30)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert "LABPROBE_DEV" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []
