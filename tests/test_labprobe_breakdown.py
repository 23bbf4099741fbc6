"""labprobe collect's per-slot "breakdown" (lab/tools/labprobe/breakdown.c)
from a synthetic trace, without a VM: where each yanked slot's teardown
spent its time (rescan-lock wait and hold, nvme unbind inside or outside
the lock, the structural rest, the waits) and the IRQ threads' CPU time.

collect reads the trace from LABPROBE_TRACE (kprobe_profile from
LABPROBE_TRACE.profile) and then leaves tracefs alone, and the kernel log
from LABPROBE_KMSG: nothing here reads or writes the host's tracing or log.
The slots' buses and namespaces are ones this host does not have, so
collect finds them emptied at once. CPU times: the arm state names this
test's own process and its parent as the IRQ threads, whose schedstat
collect reads (read-only)."""

import json
import os
import pathlib

import pytest

from conftest import CRASHES, run

WAITS = ["synchronize_rcu", "synchronize_srcu", "blk_mq_freeze_queue_wait", "free_irq", "del_gendisk",
         "device_del"]
BD_PROBES = ["lp_bd_lock", "lp_bd_lock_ret", "lp_bd_unlock", "lp_bd_nvrm_ret"] + [
    f"lp_bd_{w}{r}" for w in ("rcu", "srcu", "freeze", "freeirq", "delgd", "devdel") for r in ("", "_ret")]
HOTPLUG_PROBES = ["lp_isr", "lp_change", "lp_unconf", "lp_disc", "lp_nvrm", "lp_nvrm_ret", "lp_del", "lp_add",
                  "lp_conf", "lp_aer", "lp_rec", "lp_rec_ret", "lp_reset", "lp_unbind"]


def start_ticks(pid):
    """/proc/PID/stat field 22, as breakdown.c reads it."""
    text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2:].split()[19])


def slot(name, bus, irqs, above=None):
    s = {"slot": name, "bus": bus, "port": f"0000:00:{bus - 0xe0 + 1:02x}.0", "irqs": irqs,
         "ctrls": [f"nvmelabtest{name}"], "namespaces": [f"nvmelabtest{name}n1"], "fio": False}
    if above:
        s.update(above_port="0000:00:1f.0", above_slot="99", above_irqs=above)
    return s


def thread(irq, pid, cpu_ns=0):
    return {"irq": irq, "pid": pid, "start": start_ticks(pid), "cpu_ns": cpu_ns}


def line(comm, pid, ts, event, args=""):
    """One line of tracefs's trace (clock mono, printed in us)."""
    return f"{comm + '-' + str(pid):>22} [001] d..1. {ts:12.6f}: {event}: (func+0x0/0x10){args}\n"


def pci(bus):
    return f'0000:{bus:02x}:00.0'


def slot_teardown(comm, pid, bus, t, unbind_first=False):
    """One slot's teardown in its IRQ thread from t (s): a stock kernel's
    (nvme_remove under pci_rescan_remove_lock) or, unbind_first, the
    patched one's (nvme_remove before the lock). Times in ms after t:
      lock: entry +1, got it +1.4 (stock) / +18 .. +25.1 (patched)
      nvme_remove: +2.1 .. +19 (stock: 16.9 ms) / +2 .. +16 (14 ms)
      inside it: synchronize_rcu 6 ms; del_gendisk 4 ms with a device_del
      of 1 ms nested; free_irq 2 ms
      then device_del of the pci_dev 2 ms, unlock."""
    ms = lambda x: t + x / 1e3  # noqa: E731
    out = [line(comm, pid, ms(0), "lp_change", " events=0x108"), line(comm, pid, ms(0.5), "lp_unconf", " presence=0")]
    lock = [line(comm, pid, ms(1 if not unbind_first else 18), "lp_bd_lock"),
            line(comm, pid, ms(1.4 if not unbind_first else 25.1), "lp_bd_lock_ret")]
    n0 = 2.1 if not unbind_first else 2
    n1 = 19 if not unbind_first else 16
    unbind = [line(comm, pid, ms(n0 - 0.05), "lp_unbind", f' name="{pci(bus)}"'),
              line(comm, pid, ms(n0), "lp_nvrm"),
              line(comm, pid, ms(n0 + 1), "lp_bd_rcu"), line(comm, pid, ms(n0 + 7), "lp_bd_rcu_ret"),
              line(comm, pid, ms(n0 + 7.5), "lp_bd_delgd"),
              line(comm, pid, ms(n0 + 8), "lp_bd_devdel"),
              line(comm, pid, ms(n0 + 8), "lp_del", f' name="nvmelabtest{bus - 0xe0}n1"'),   # the namespace
              line(comm, pid, ms(n0 + 9), "lp_bd_devdel_ret"),
              line(comm, pid, ms(n0 + 11.5), "lp_bd_delgd_ret"),
              line(comm, pid, ms(n0 + 11.6), "lp_bd_freeirq"), line(comm, pid, ms(n0 + 13.6), "lp_bd_freeirq_ret"),
              line(comm, pid, ms(n1), "lp_nvrm_ret"), line(comm, pid, ms(n1), "lp_bd_nvrm_ret")]
    e = 25.2 if unbind_first else 19.5
    structural = [line(comm, pid, ms(e), "lp_bd_devdel"), line(comm, pid, ms(e), "lp_del", f' name="{pci(bus)}"'),
                  line(comm, pid, ms(e + 2), "lp_bd_devdel_ret"), line(comm, pid, ms(e + 3), "lp_bd_unlock")]
    return out + (unbind + lock if unbind_first else lock + unbind) + structural


def switch(cpu, ts, prev, prev_pid, nxt, next_pid):
    """A sched_switch line as tracefs prints it."""
    return (f"{prev + '-' + str(prev_pid):>22} [{cpu:03d}] d..2. {ts:12.6f}: sched_switch: prev_comm={prev} "
            f"prev_pid={prev_pid} prev_prio=120 prev_state=R ==> next_comm={nxt} next_pid={next_pid} "
            f"next_prio=120\n")


def collect(labprobe, tmp_path, slots, trace, probes=None, threads=(), profile=None, gone=None,
            window=None, ok=True, tracepoints=False):
    """collect on the trace; ok=True: it must pass, False: it must fail
    (exit 1 with a report), None: the finished process is returned."""
    for s in slots:
        assert not any(d.startswith(f"0000:{s['bus']:02x}:") for d in os.listdir("/sys/bus/pci/devices")), \
            "the test's bus numbers exist on this host"
    placed = {p: "ok" for p in HOTPLUG_PROBES + BD_PROBES}
    placed.update(probes or {})
    state = {"slots": slots, "kmsg_seq": 0, "tracepoints": tracepoints, "probes": placed, "armed_at": 99.0,
             "breakdown": {"threads": list(threads)}}
    if window is not None:
        state["cpu_window"] = window
    (tmp_path / "state.json").write_text(json.dumps(state))
    (tmp_path / "trace").write_text("# tracer: nop\n#\n" + "".join(trace))
    if profile is not None:
        (tmp_path / "trace.profile").write_text(profile)
    (tmp_path / "kmsg").write_text("6,1,1000,-;Linux version 6.1.0-labtest\n")
    env = dict(os.environ, LABPROBE_TRACE=str(tmp_path / "trace"), LABPROBE_KMSG=str(tmp_path / "kmsg"))
    r = run([labprobe, "collect", "--dir", str(tmp_path), "--expect-gone", gone or ",".join(s["slot"] for s in slots),
             "--timeout", "0", "--fio-timeout", "0"], env=env, timeout=30)
    assert r.returncode not in CRASHES, (r.returncode, r.stderr)
    if ok is None:
        return r
    rep = json.loads(r.stdout)
    if ok:
        assert r.returncode == 0 and rep["ok"], rep
    else:
        assert r.returncode == 1 and not rep["ok"], rep
    return rep, {s["slot"]: s for s in rep["slots"]}


def approx(x):
    return pytest.approx(x, abs=0.01)


def test_breakdown_of_a_locked_and_an_early_unbind(labprobe, tmp_path):
    """Slot 1 torn down as on a stock kernel (nvme_remove inside the rescan
    lock), slot 2 as on the patched one (before it), each in its own port's
    IRQ thread; slot 2's thread waits for the lock while slot 1 holds it.
    Another thread's calls and anything before arm do not count; a call
    with no return is unfinished, not summed."""
    trace = [line("kworker/0:1", 50, 98.5, "lp_bd_rcu"),                 # before arm
             line("<idle>", 0, 100.0, "lp_isr", " irq=24"), line("<idle>", 0, 100.0001, "lp_isr", " irq=25")]
    trace += slot_teardown("irq/24-pciehp", 301, 0xe1, 100.001)
    trace += slot_teardown("irq/25-pciehp", 302, 0xe2, 100.002, unbind_first=True)
    trace += [line("kworker/1:2", 51, 100.003, "lp_bd_rcu"), line("kworker/1:2", 51, 100.009, "lp_bd_rcu_ret"),
              line("irq/25-pciehp", 302, 100.040, "lp_bd_srcu")]    # still waiting at collect
    trace.sort(key=lambda x: float(x.split("]")[1].split()[1].rstrip(":")))
    profile = ("  lp_isr                 2   0\n  lp_bd_lock_ret         2   1\n"
               "  labprobe/lp_bd_rcu_ret 3   2\n  lp_other               9   7\n")
    rep, by = collect(labprobe, tmp_path, [slot("1", 0xe1, [24]), slot("2", 0xe2, [25])], trace,
                      threads=[thread(24, os.getpid()), thread(25, os.getppid())], profile=profile)
    b1, b2 = by["1"]["breakdown"], by["2"]["breakdown"]
    assert (b1["thread"], b1["pid"], b1["thread_slots"]) == ("irq/24-pciehp", 301, 1)
    assert (b2["thread"], b2["pid"], b2["thread_slots"]) == ("irq/25-pciehp", 302, 1)
    # stock: wait 0.4, held 1.4 .. 22.5 = 21.1, nvme_remove 16.9 of it inside
    assert b1["lock_wait_ms"] == approx(0.4) and b1["lock_held_ms"] == approx(21.1)
    assert b1["unbind_ms"] == approx(16.9) and b1["unbind_in_lock"] is True
    assert b1["structural_ms"] == approx(21.1 - 16.9)
    # patched: nvme_remove 14 ms before the lock; the lock waited 7.1 ms for slot 1's
    assert b2["lock_wait_ms"] == approx(7.1) and b2["lock_held_ms"] == approx(28.2 - 25.1)
    assert b2["unbind_ms"] == approx(14) and b2["unbind_in_lock"] is False
    assert b2["structural_ms"] == approx(b2["lock_held_ms"])
    for b in (b1, b2):
        w = b["waits"]
        assert w["synchronize_rcu"] == {"n": 1, "ms": approx(6)}
        assert w["del_gendisk"] == {"n": 1, "ms": approx(4)}
        assert w["device_del"] == {"n": 2, "ms": approx(3)}    # nested in del_gendisk, and the pci_dev's
        assert w["free_irq"] == {"n": 1, "ms": approx(2)}
        assert w["blk_mq_freeze_queue_wait"] == {"n": 0, "ms": 0}
    assert b1["waits"]["synchronize_srcu"] == {"n": 0, "ms": 0} and b1["unfinished"] == 0
    assert b2["waits"]["synchronize_srcu"] == {"n": 0, "ms": 0} and b2["unfinished"] == 1
    # CPU: this process and its parent stood in for the two threads
    assert b1["cpu_ms"] > 0 and b2["cpu_ms"] > 0
    assert rep["teardown_cpu_ms"] == approx(b1["cpu_ms"] + b2["cpu_ms"])
    assert rep["ncpus"] >= 1 and rep["cpu_floor_ms"] == approx(rep["teardown_cpu_ms"] / rep["ncpus"])
    assert rep["kprobe_missed"] == 3 and rep["kprobe_missed_by_probe"] == {"lp_bd_lock_ret": 1, "lp_bd_rcu_ret": 2}
    assert "CLOCK_MONOTONIC" in rep["breakdown_note"] and "inclusive" in rep["breakdown_note"]
    # the existing timeline is untouched
    assert by["1"]["ms"]["unbind_start"] == approx(3.1) and by["1"]["ms"]["pci_removed"] == approx(20.5)
    (tmp_path / "example.json").write_text(json.dumps(b1, indent=1))


def test_tracepoints_lie_in_their_kprobe_spans(labprobe, tmp_path):
    """The series' "handled" tracepoint comes after the handler's kprobe,
    its state_lock and two log lines, which a debug kernel or a loaded host
    stretches over ms (debug-rescan1: 5.142 ms); "disconnected" follows the
    mark, which a CI canary run saw 5.7 ms after its kprobe (a preempted
    TCG vCPU, an interrupt or pci_bus_sem). Each agrees while it lies
    between its kprobe and the slot's next kprobe phase, and disagrees by
    how far it lies outside (a tracepoint of another slot's thread, say)."""
    def tp(comm, pid, ts, event, name):
        return line(comm, pid, ts, event, f" slot={name} port=0000:00:0{name}.0")

    trace = [line("<idle>", 0, 100.0, "lp_isr", " irq=24"), line("<idle>", 0, 100.0, "lp_isr", " irq=25")]
    for name, irq, bus, t in (("1", 24, 0xe1, 100.001), ("2", 25, 0xe2, 100.002)):
        comm, pid = f"irq/{irq}-pciehp", 300 + irq
        trace += slot_teardown(comm, pid, bus, t)
        trace += [tp("<idle>", 0, t - 0.0005, "pciehp_slot_event", name),
                  line(comm, pid, t + 0.0004, "lp_disc")]
        # slot 1: 0.3 ms after the handler's entry, before its disconnected kprobe (0.4 ms)
        # slot 2: 7.6 ms after its disconnected kprobe
        # disconnected: slot 1 1.1 ms after its kprobe, before unbind_start
        # (2.1 ms); slot 2 0.9 ms after it
        trace += [tp(comm, pid, t + (0.0003 if name == "1" else 0.008), "pciehp_slot_disable_begin", name),
                  tp(comm, pid, t + (0.0015 if name == "1" else 0.003), "pciehp_dev_disconnected", name)]
    rep, _ = collect(labprobe, tmp_path, [slot("1", 0xe1, [24]), slot("2", 0xe2, [25])], sorted(
        trace, key=lambda x: float(x.split("]")[1].split()[1].rstrip(":"))), tracepoints=True)
    assert rep["method_disagreement_ms"]["handled"] == approx(7.6)
    assert rep["method_disagreement_ms"]["disconnected"] == approx(0.9)
    rep, _ = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])],
                     [x for x in trace if "irq=25" not in x and "slot=2" not in x and "irq/25" not in x],
                     tracepoints=True, gone="1")
    assert rep["method_disagreement_ms"]["handled"] == 0
    assert rep["method_disagreement_ms"]["disconnected"] == 0


def test_upstream_hotplug_event_is_timed_per_slot(labprobe, tmp_path):
    """Patch 0001's pci_hp_event (TRACE_SYSTEM pci, as upstream prints it)
    is timed for the slot it names, after the first pciehp interrupt; an
    event of a slot not armed, or without a slot, times nothing."""
    def hp(comm, pid, ts, slot_name, event):
        return (f"{comm + '-' + str(pid):>22} [001] ..... {ts:12.6f}: pci_hp_event: "
                f"0000:00:0{slot_name}.0 slot:{slot_name}, event:{event}\n")

    comm, pid = "irq/24-pciehp", 324
    trace = [line("<idle>", 0, 100.0, "lp_isr", " irq=24")] + slot_teardown(comm, pid, 0xe1, 100.001)
    trace += [hp(comm, pid, 100.0012, "1", "LINK_DOWN"), hp(comm, pid, 100.0013, "1", "CARD_NOT_PRESENT"),
              hp("irq/25-pciehp", 325, 100.0005, "7", "LINK_DOWN"),
              f"{'x-1':>22} [001] ..... {100.0001:12.6f}: pci_hp_event: 0000:00:01.0 event:LINK_DOWN\n"]
    trace.sort(key=lambda x: float(x.split("]")[1].split()[1].rstrip(":")))
    _, slots = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])], trace, tracepoints=True)
    assert slots["1"]["tracepoint_ms"]["hp_event"] == approx(1.2), slots["1"]["tracepoint_ms"]
    # without the event (stock) the slot has none
    _, slots = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])],
                       [x for x in trace if "pci_hp_event" not in x], tracepoints=True)
    assert slots["1"]["tracepoint_ms"]["hp_event"] is None


def test_probes_not_placed_give_nulls(labprobe, tmp_path):
    """A kernel where the rescan lock's and a wait's probes could not be
    placed (inlined, or Debian's): what they feed is null, never 0; the rest
    is still reported. No kprobe_profile, no CPU times: null as well."""
    trace = [line("<idle>", 0, 100.0, "lp_isr", " irq=24")] + slot_teardown("irq/24-pciehp", 301, 0xe1, 100.001)
    rep, by = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])], trace,
                      probes={"lp_bd_lock_ret": "No such file or directory", "lp_bd_freeze": "Invalid argument"})
    b = by["1"]["breakdown"]
    assert b["lock_wait_ms"] is None and b["lock_held_ms"] is None and b["structural_ms"] is None
    assert b["unbind_in_lock"] is None and b["unbind_ms"] == approx(16.9)
    assert b["waits"]["blk_mq_freeze_queue_wait"] is None and b["waits"]["free_irq"]["n"] == 1
    assert b["cpu_ms"] is None and rep["teardown_cpu_ms"] is None and rep["cpu_floor_ms"] is None
    assert rep["kprobe_missed"] is None


def test_jbof_slots_share_the_root_ports_thread(labprobe, tmp_path):
    """A JBOF yanked whole: its root port's IRQ thread tears both drives
    down; each slot has its own unbind, the thread's figures are shared
    (thread_slots 2) and its CPU time counts once in teardown_cpu_ms. A
    slot not yanked has no breakdown."""
    t = 100.001
    ms = lambda x: t + x / 1e3  # noqa: E731
    c, p = "irq/30-pciehp", 400
    trace = [line("<idle>", 0, 100.0, "lp_isr", " irq=30"), line(c, p, ms(0), "lp_unconf", " presence=0"),
             line(c, p, ms(1), "lp_bd_lock"), line(c, p, ms(1.5), "lp_bd_lock_ret")]
    for i, bus in enumerate((0xe1, 0xe2)):
        at = 2 + 10 * i
        trace += [line(c, p, ms(at), "lp_unbind", f' name="{pci(bus)}"'), line(c, p, ms(at + 0.1), "lp_nvrm"),
                  line(c, p, ms(at + 1), "lp_del", f' name="nvmelabtest{bus - 0xe0}n1"'),
                  line(c, p, ms(at + 5.1), "lp_bd_nvrm_ret"), line(c, p, ms(at + 5.1), "lp_nvrm_ret")]
    trace += [line(c, p, ms(30), "lp_del", f' name="{pci(0xe1)}"'),
              line(c, p, ms(31), "lp_del", f' name="{pci(0xe2)}"'), line(c, p, ms(31.5), "lp_bd_unlock")]
    slots = [slot("1", 0xe1, [31], above=[30]), slot("2", 0xe2, [32], above=[30]), slot("3", 0xe3, [33], above=[30])]
    rep, by = collect(labprobe, tmp_path, slots, trace, threads=[thread(30, os.getpid())], gone="1,2")
    b1, b2 = by["1"]["breakdown"], by["2"]["breakdown"]
    assert "breakdown" not in by["3"]
    assert b1["thread"] == b2["thread"] == "irq/30-pciehp" and b1["thread_slots"] == b2["thread_slots"] == 2
    assert b1["unbind_ms"] == approx(5) and b2["unbind_ms"] == approx(5)
    assert b1["unbind_in_lock"] is True and b1["lock_held_ms"] == approx(30)
    assert b1["structural_ms"] == b2["structural_ms"] == approx(30 - 10)
    assert rep["teardown_cpu_ms"] == approx(b1["cpu_ms"]) and b1["cpu_ms"] == b2["cpu_ms"] > 0


def by_ts(trace):
    return sorted(trace, key=lambda x: float(x.split("]")[1].split()[1].rstrip(":")))


def test_cpu_window_of_a_yank(labprobe, tmp_path):
    """What the guest's 2 CPUs did from the first pciehp interrupt (100.0 s)
    to the last drive gone (pci_removed at 100.0205 s, 20.5 ms): CPU 0 ran
    the IRQ thread (then idle from +20 ms), CPU 1 fio until +5 ms, a
    kworker until +12 ms, then idle. A switch after the window closes each
    CPU's last interval; switches before arm are no part of it."""
    trace = [line("<idle>", 0, 100.0, "lp_isr", " irq=24")] + slot_teardown("irq/24-pciehp", 301, 0xe1, 100.001)
    trace += [switch(0, 98.0, "swapper/0", 0, "fio", 812),                  # before arm
              switch(0, 100.0200, "irq/24-pciehp", 301, "swapper/0", 0),
              switch(0, 100.0300, "swapper/0", 0, "kworker/0:1", 50),       # after the window
              switch(1, 100.0050, "fio", 812, "kworker/1:2", 51),
              switch(1, 100.0120, "kworker/1:2", 51, "swapper/1", 0),
              switch(1, 100.0400, "swapper/1", 0, "fio", 812)]
    rep, _ = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])], by_ts(trace),
                     window={"trigger": "ok", "ncpus": 2})
    w = rep["cpu_window"]
    assert w["ms"] == approx(20.5) and w["ncpus"] == 2 and w["switches"] == 3
    # CPU 0: the IRQ thread 20 ms, idle 0.5; CPU 1: fio 5, kworker 7, idle 8.5
    assert w["by_task"] == {"irq/N-pciehp": approx(20), "kworker/N:N": approx(7), "fio": approx(5)}
    assert w["busy_ms"] == approx(32) and w["idle_ms"] == approx(9) and w["unknown_ms"] == 0
    assert w["busy_pct"] == approx(100 * 32 / 41)
    assert "cpu_window_error" not in rep


def test_cpu_window_is_null_when_it_cannot_be_trusted(labprobe, tmp_path):
    """No trigger at arm, a trace that lost events, or a CPU that switched
    nothing (its time unknown, never idle)."""
    base = [line("<idle>", 0, 100.0, "lp_isr", " irq=24")] + slot_teardown("irq/24-pciehp", 301, 0xe1, 100.001)
    rep, _ = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])], base,
                     window={"trigger": "could not be set", "ncpus": 2})
    assert rep["cpu_window"] is None and "trigger" in rep["cpu_window_error"]
    lost = by_ts(base + [switch(0, 100.002, "fio", 812, "swapper/0", 0)]) + ["CPU:1 [LOST 37 EVENTS]\n"]
    rep, _ = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])], lost, window={"trigger": "ok", "ncpus": 2})
    assert rep["cpu_window"] is None and rep["cpu_window_error"] == "the trace lost events"
    quiet = by_ts(base + [switch(0, 100.010, "fio", 812, "swapper/0", 0)])
    rep, _ = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])], quiet, window={"trigger": "ok", "ncpus": 2})
    w = rep["cpu_window"]
    assert w["unknown_ms"] == approx(20.5) and w["idle_ms"] == approx(10.5) and w["by_task"] == {"fio": approx(10)}


def test_a_removal_needs_both_deletions_and_pciehp(labprobe, tmp_path):
    """removal-traced wants the pci_dev's and the namespace's deletion, and
    pciehp-handled the slot's IRQ thread: a slot emptied some other way, or
    whose namespace deletion was never traced, fails collect."""
    teardown = slot_teardown("irq/24-pciehp", 301, 0xe1, 100.001)
    no_ns = [x for x in teardown if "nvmelabtest1n1" not in x]
    base = [line("<idle>", 0, 100.0, "lp_isr", " irq=24")]
    for trace, check, detail in (
            (base + no_ns, "removal-traced", "no block device removal"),
            # the deletions, but in a thread that is no pciehp IRQ thread
            (base + [x.replace("irq/24-pciehp-301", "kworker/0:1-301") for x in teardown], "pciehp-handled",
             "no pciehp IRQ thread")):
        rep, _ = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])], trace, ok=False)
        failed = {c["name"]: c["detail"] for c in rep["checks"] if not c["ok"]}
        assert check in failed and detail in failed[check], failed


def test_collect_refuses_a_slot_it_did_not_arm(labprobe, tmp_path):
    trace = [line("<idle>", 0, 100.0, "lp_isr", " irq=24")] + slot_teardown("irq/24-pciehp", 301, 0xe1, 100.001)
    r = collect(labprobe, tmp_path, [slot("1", 0xe1, [24])], trace, gone="1,7", ok=None)
    assert r.returncode == 2 and "--expect-gone slot 7 was not armed" in r.stderr


def test_drives_refuses_an_empty_expectation(labprobe):
    r = run([labprobe, "drives", "--expect", ""], timeout=30)
    assert r.returncode == 2 and "--expect needs at least one SLOT=SERIAL" in r.stderr
    r = run([labprobe, "drives", "--timeout", "1"], timeout=30)
    assert r.returncode == 2 and "--expect needs at least one" in r.stderr
