"""Filters between the guest probe, the scenarios and the results files."""

import json
import os
import re
import statistics
import sys

from ansible.errors import AnsibleFilterError

# shared helpers, one copy (lab/plugins/lab_common.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab_common import json_object, p50_max  # noqa: E402
import lab_judge  # noqa: E402
from lab_judge import add_findings  # noqa: E402


def lab_probe_drive_args(slot_map):
    """labprobe arguments naming every cold-plugged drive: --drive SLOT=SERIAL."""
    args = []
    for entry in slot_map:
        if entry.get("drive"):
            args += ["--drive", f"{entry['slot']}={entry['drive']['serial']}"]
    return args


def lab_probe_report(stdout, rc, stderr=""):
    """The probe's JSON report; a probe that crashed or printed no JSON
    becomes a failed report whose finding says what happened."""
    try:
        report = json.loads(stdout)
        if not isinstance(report, dict):
            raise ValueError("not an object")
    except (TypeError, ValueError):
        return {"ok": False, "checks": [], "findings": [{
            "kind": "probe-error",
            "line": f"labprobe exited {rc} without a JSON report",
            "context": (str(stderr) + "\n" + str(stdout)).strip().splitlines()[-20:],
        }]}
    report["ok"] = bool(report.get("ok")) and int(rc) == 0
    # a failed report names what failed: its failed checks, when it has no
    # finding of its own (rerun1's smoke failed on drive-slot-1 with none)
    if not report["ok"] and not report.get("findings"):
        failed = [c for c in report.get("checks") or [] if isinstance(c, dict) and not c.get("ok")]
        report["findings"] = [{"kind": "check", "line": f"{c.get('name')}: {c.get('detail', '')}", "context": []}
                              for c in failed] or [{
            "kind": "probe-error",
            "line": str(report.get("error") or
                        f"labprobe reported failure (exit {rc}) without a failed check or finding"),
            "context": str(stderr).strip().splitlines()[-20:]}]
    return report


def lab_read_json(path):
    """A JSON object from a file on the controller; None if it is missing
    or not a JSON object (a VM whose watchdog never sampled it)."""
    try:
        with open(path) as f:
            return json_object(f.read())
    except OSError:
        return None


def lab_hpslot_serials(stdout):
    """SLOT=SERIAL for every drive `hpslot add --json` put in a slot."""
    report = json_object(stdout) or {}
    return [f"{s['slot']}={s['serial']}" for s in report.get("slots", [])
            if s.get("serial") and s.get("result", "ok") in ("ok", "added")]


METHOD_TOLERANCE_MS = 5.0


# phases of one slot's removal that happen in this order (each pair: the
# first before the second): the slot's interrupt before its IRQ thread
# handles it, the thread before it marks and unbinds, a driver's unbind
# entry before its return, and both before the pci_dev is removed
# (806 drives of the committed reference results keep it)
CAUSAL = [("isr", "handled"), ("handled", "disconnected"), ("handled", "unbind_start"),
          ("unbind_start", "unbound"), ("unbound", "pci_removed"), ("disconnected", "pci_removed")]


def _clock_went_back(ms):
    """(what, value) of the first causal pair of a slot's timeline measured
    in the wrong order, else None."""
    for a, b in CAUSAL:
        x, y = ms.get(a), ms.get(b)
        if x is not None and y is not None and y < x:
            return f"{b}_ms {y} before {a}_ms", x
    return None


def lab_removal_metrics(reports):
    """Per-phase removal latencies (ms after the first pciehp interrupt of
    the yank) over every drive of every iteration: p50, max and count; the
    time until the last drive was gone; the pause the yank took."""
    phases = ["isr", "handled", "disconnected", "unbind_start", "unbound", "pci_removed",
              "blockdev_gone", "fio_error"]
    per_phase = {p: [] for p in phases}
    last_gone, paused, drives, impossible = [], [], [], []
    for i, rep in enumerate(reports, 1):
        collect = (rep.get("steps") or {}).get("collect") or {}
        yanked = [slot for slot in collect.get("slots", []) if slot.get("expected_gone")]
        drives.append(len(yanked))
        for slot in yanked:
            went_back = _clock_went_back(slot.get("ms") or {})
            if went_back:
                # which of the two is wrong cannot be told: the slot's
                # timeline is kept out of the data, and the judge fails the record
                impossible.append({"what": f"slot {slot.get('slot')}: {went_back[0]}", "value": went_back[1],
                                   "why": "the clock went back: a later phase of the removal before an earlier one",
                                   "iteration": i})
            for p in phases:
                v = None if went_back else (slot.get("ms") or {}).get(p)
                # every phase is measured from the first interrupt of the
                # yank: one before it is not a time, it is a wrong clock or
                # a wrong event, and is kept out of the data (the judge fails
                # the record with it)
                if v is not None and v < 0:
                    impossible.append({"what": f"{p}_ms of slot {slot.get('slot')}", "value": v,
                                       "why": "before the first pciehp interrupt it is measured from",
                                       "iteration": i})
                    v = None
                per_phase[p].append(v)
        last_gone.append(collect.get("last_gone_ms"))
        yank = (rep.get("steps") or {}).get("yank") or {}
        paused.append(yank.get("paused_ms"))
    metrics = {f"{p}_ms": p50_max(v) for p, v in per_phase.items()}
    # drives measured: the fewest yanked drives any iteration's collect reported
    metrics["drives"] = min(drives) if drives else 0
    metrics["impossible"] = impossible
    # what the guest's CPUs did in each yank's window (labprobe window.c)
    metrics["cpu_window"] = [((rep.get("steps") or {}).get("collect") or {}).get("cpu_window") for rep in reports]
    # every drive's figure, for the latency distribution plots (lab-report)
    metrics["samples_ms"] = {p: [round(x, 3) for x in v if x is not None] for p, v in per_phase.items()}
    # patched kernels: the series' pci_hotplug tracepoints next to the
    # kprobes, and their largest disagreement over all drives and iterations
    # (hp_event: upstream's generic hotplug event, patch 0001; informative)
    tp_phases = ["isr", "handled", "disconnected", "slot_disabled", "hp_event"]
    tp = {p: [] for p in tp_phases}
    disagree = {p: [] for p in tp_phases[:3]}
    for rep in reports:
        collect = (rep.get("steps") or {}).get("collect") or {}
        for slot in collect.get("slots", []):
            if slot.get("expected_gone") and "tracepoint_ms" in slot:
                for p in tp_phases:
                    tp[p].append(slot["tracepoint_ms"].get(p))
        for p, v in (collect.get("method_disagreement_ms") or {}).items():
            disagree[p].append(v if v is not None else float("inf"))
    if any(tp.values()):
        metrics["tracepoint_ms"] = {p: p50_max(v) for p, v in tp.items()}
        metrics["method_disagreement_ms"] = {
            p: (None if not v or max(v) == float("inf") else round(max(v), 3)) for p, v in disagree.items()}
        # handled and disconnected: both methods mark the same code in the
        # slot's IRQ thread, so each tracepoint must lie in its kprobe span
        # (labprobe: from the phase's kprobe to the slot's next one). isr is informative only: the
        # kprobe is the handler's first entry, the tracepoint the first entry
        # that read PDC/DLLSC from Slot Status, and with many slots yanked
        # at once those are not always the same interrupt.
        metrics["method_tolerance_ms"] = METHOD_TOLERANCE_MS
        metrics["methods_agree"] = all(
            metrics["method_disagreement_ms"].get(p) is not None
            and metrics["method_disagreement_ms"][p] <= METHOD_TOLERANCE_MS for p in ("handled", "disconnected"))
    metrics["last_gone_ms"] = p50_max(last_gone)
    metrics["yank_pause_ms"] = p50_max(paused)
    metrics["clock"] = "guest CLOCK_MONOTONIC via tracefs (trace_clock=mono), 1 us resolution"
    return metrics


def lab_removal_expect(slots, iterations, some=False):
    """What a bulk removal's record must hold (the judge's declaration,
    lab/plugins/lab_judge.py): a report an iteration, and every yanked
    drive of every iteration timed from the interrupt to its PCI removal and
    to fio's error, on as many drives as were yanked (some: at least one
    drive's interrupt, for a JBOF whose drives the profile may leave out)."""
    n, drives = int(iterations) * len(slots), len(slots)
    return {"iterations": int(iterations),
            "measured": {"isr_ms": max(1, n) if some else n, "pci_removed_ms": n, "fio_error_ms": n},
            "at_least": {"drives": drives}, "at_most": {"drives": drives}}


def lab_method_findings(metrics):
    """A finding when the series' tracepoints and the kprobes disagree on
    when pciehp handled or marked a yanked slot (metrics.methods_agree
    false: more than METHOD_TOLERANCE_MS apart, or one method saw the phase
    and the other did not); none without tracepoints (stock, distro)."""
    if (metrics or {}).get("methods_agree", True):
        return []
    dis = metrics.get("method_disagreement_ms") or {}
    return [{"kind": "method-disagreement",
             "line": "tracepoints and kprobes disagree: " + ", ".join(
                 f"{p} {'seen by one method only' if dis.get(p) is None else str(dis[p]) + ' ms apart'}"
                 for p in ("handled", "disconnected")
                 if dis.get(p) is None or dis[p] > METHOD_TOLERANCE_MS)
             + f" (tolerance {METHOD_TOLERANCE_MS} ms)", "context": []}]


BREAKDOWN_PARTS = ["lock_wait_ms", "lock_held_ms", "unbind_ms", "structural_ms", "cpu_ms"]
BREAKDOWN_WAITS = ["synchronize_rcu", "synchronize_srcu", "blk_mq_freeze_queue_wait", "free_irq", "del_gendisk",
                   "device_del"]


def _median_max(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return {"median": None, "max": None, "n": 0}
    return {"median": round(statistics.median(values), 3), "max": round(values[-1], 3), "n": len(values)}


# cpu_window's tasks that are not the teardown: the I/O load and the lab's
# own instruments in the guest (the probe, the agent and what it runs)
FLOOR_WORKLOAD_TASKS = ("fio",)
FLOOR_LAB_TASKS = ("labprobe", "qemu-ga", "pythonN", "sh", "sleep", "perf")


def _floors(t_ms, irq_floor_ms, window):
    """How far T(N) (ms from the first pciehp interrupt until the last
    drive was gone) is from what the guest's CPUs had to do meanwhile, each
    floor the CPU time of a set of tasks divided by the online CPUs:
    irq_threads (the pciehp IRQ threads' own CPU time, breakdown.c),
    teardown (every task cpu_window saw except the I/O load and the lab's
    instruments: the IRQ threads and whatever the teardown woke, kernel
    workers, RCU, devtmpfs, udev, journald) and all_busy (every busy CPU
    ms). None where a part was not measured."""
    w = window or {}
    ncpus, by_task = w.get("ncpus"), w.get("by_task") or {}
    floors = {"irq_threads_ms": irq_floor_ms, "teardown_ms": None, "all_busy_ms": None}
    if ncpus and w.get("busy_ms") is not None:
        floors["all_busy_ms"] = round(w["busy_ms"] / ncpus, 3)
        other = sum(v for k, v in by_task.items() if k in FLOOR_WORKLOAD_TASKS + FLOOR_LAB_TASKS)
        floors["teardown_ms"] = round((w["busy_ms"] - other) / ncpus, 3)
    return {"T_ms": t_ms, **floors,
            "T_over": {k[:-3]: (round(t_ms / v, 3) if t_ms is not None and v else None)
                       for k, v in floors.items()},
            "not_teardown": list(FLOOR_WORKLOAD_TASKS + FLOOR_LAB_TASKS)}


def lab_breakdown_metrics(report):
    """Where the yanked drives' teardowns of one bulk removal spent their
    time (labprobe collect's slots[].breakdown, lab/tools/labprobe/
    breakdown.c): for each part (rescan-lock wait and hold, nvme unbind,
    structural rest, IRQ thread CPU) and each wait function, the median and
    max over the yanked slots and how many slots had a value; the lock
    waits summed (each IRQ thread once: a JBOF's slots share their root
    port's); how many unbinds ran inside the lock; the teardown's CPU time
    and its floor (CPU time / online CPUs); what every CPU did in the
    window (cpu_window, labprobe window.c). A part nobody measured (no
    breakdown, a probe the kernel did not take) is null, never 0."""
    collect = ((report or {}).get("steps") or {}).get("collect") or {}
    slots = [s for s in collect.get("slots") or [] if s.get("expected_gone")]
    bds = [s.get("breakdown") or {} for s in slots]
    out = {"slots": len(slots), "with_breakdown": sum(1 for b in bds if b)}
    for part in BREAKDOWN_PARTS:
        out[part] = _median_max([b.get(part) for b in bds])
    # per thread, once: (thread, pid), or the slot when no thread was traced
    per_thread = {}
    for s, b in zip(slots, bds):
        if b:
            per_thread.setdefault((b.get("thread"), b.get("pid")) if b.get("thread") else s.get("slot"), b)
    waits = [b["lock_wait_ms"] for b in per_thread.values() if b.get("lock_wait_ms") is not None]
    out["lock_wait_ms"]["sum"] = round(sum(waits), 3) if waits else None
    in_lock = [b.get("unbind_in_lock") for b in bds if b.get("unbind_in_lock") is not None]
    out["unbind_in_lock"] = {"inside": in_lock.count(True), "outside": in_lock.count(False)} if in_lock else None
    out["waits"] = {}
    for fn in BREAKDOWN_WAITS:
        calls = [(b.get("waits") or {}).get(fn) for b in bds]
        out["waits"][fn] = _median_max([c.get("ms") if c else None for c in calls])
        thread_calls = [((b.get("waits") or {}).get(fn) or {}).get("n") for b in per_thread.values()]
        thread_calls = [n for n in thread_calls if n is not None]
        out["waits"][fn]["calls"] = sum(thread_calls) if thread_calls else None
    for key in ("teardown_cpu_ms", "cpu_floor_ms", "ncpus", "kprobe_missed", "cpu_window", "cpu_window_error"):
        out[key] = collect.get(key)
    out["floors"] = _floors(collect.get("last_gone_ms"), collect.get("cpu_floor_ms"), collect.get("cpu_window"))
    out["note"] = ("ms, inclusive times of each yanked slot's pciehp IRQ thread (nested calls count in each); "
                   "median and max over the slots; lock_wait_ms.sum and waits.calls count each thread once")
    return out


def lab_scaling_metrics(reports, sizes):
    """T(N): ms from the first pciehp interrupt until the last of N yanked
    drives was gone, one bulk removal a size; and T(N)/T(1)."""
    t, pause = {}, {}
    for n, rep in zip(sizes, reports):
        collect = (rep.get("steps") or {}).get("collect") or {}
        t[str(n)] = collect.get("last_gone_ms")
        pause[str(n)] = ((rep.get("steps") or {}).get("yank") or {}).get("paused_ms")
    base = t.get("1")
    ratio = {n: (round(v / base, 3) if v is not None and base else None) for n, v in t.items()}
    return {"T_ms": t, "T_over_T1": ratio, "yank_pause_ms": pause, "sizes": sizes,
            "clock": "guest CLOCK_MONOTONIC via tracefs (trace_clock=mono), 1 us resolution"}


PROFILE_IRQ_TASK = "irq/N-pciehp"
PROFILE_TOP = 40


def lab_perf_profile(text, rc, hz, timeout, drives):
    """disconnect-flag's profiled yank (lab_teardown_profile_hz): perf's
    samples of every guest CPU from before the yank until every drive was
    gone, as the guest's awk added them up (children|self|task|symbol, task
    names with their numbers made N; a "# Samples: S" line). by_task: each
    task's share of the samples (self %, summed over its functions) and
    its CPU time (share of the sampled ns, perf's event count; swapper is
    idle); irq_thread: the pciehp IRQ
    threads' functions by inclusive share of those threads' own samples
    (children, as perf computes it from the call chains), the top
    PROFILE_TOP. A report that is missing or unparsable is an error, never
    an empty profile; so is one where perf lost records ("# LOST n" /
    "# LOST_SAMPLES n" from perf report --stats, which prints only non-zero
    counts, after "# TOTAL n" which says the stats ran): perf falls behind
    exactly while the teardown keeps the CPUs busy, so a lossy profile is
    biased against what it is for."""
    out = {"hz": hz, "timeout_us": timeout, "drives": drives, "samples": None, "sampled_ms": None, "error": None,
           "lost": None, "by_task": {}, "irq_thread": None,
           "note": "perf record -a -g -e cpu-clock; percentages of all samples (by_task) or of the "
                   "irq/N-pciehp threads' samples (irq_thread.functions); perf slows the guest, so this "
                   "yank's time is not a T(N)"}
    if int(rc) != 0:
        out["error"] = f"perf report exited {rc}"
        return out
    rows = []
    for line in (text or "").splitlines():
        m = re.match(r"^# Samples: ([0-9.]+)([kKmM]?)", line)
        if m:  # perf rounds large counts (12K)
            out["samples"] = int(float(m.group(1)) * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)])
            continue
        m = re.match(r"^# (TOTAL|LOST|LOST_SAMPLES) ([0-9]+)$", line)
        if m:
            out["lost"] = out["lost"] or {"lost": 0, "lost_samples": 0}
            if m.group(1) != "TOTAL":
                out["lost"][m.group(1).lower()] = int(m.group(2))
            continue
        m = re.match(r"^# Event count \(approx\.\): ([0-9]+)", line)
        if m:  # cpu-clock counts ns: the CPU time the samples stand for
            out["sampled_ms"] = round(int(m.group(1)) / 1e6, 1)
            continue
        parts = line.split("|", 3)
        if len(parts) != 4:
            continue
        try:
            rows.append((float(parts[0]), float(parts[1]), parts[2], parts[3]))
        except ValueError:
            continue
    if not rows or not out["samples"] or not out["sampled_ms"]:
        out["error"] = "perf report had no samples or no event count"
        return out
    if out["lost"] is None:
        out["error"] = "perf report --stats printed nothing: cannot tell whether samples were lost"
        return out
    if any(out["lost"].values()):
        out["error"] = (f"perf lost records ({', '.join(f'{k} {v}' for k, v in sorted(out['lost'].items()))}): "
                        "it fell behind while the teardown kept the CPUs busy")
        return out
    share = {}
    for _, self_pct, task, _ in rows:
        share[task] = share.get(task, 0.0) + self_pct
    ms_per_pct = out["sampled_ms"] / 100.0
    out["by_task"] = {t: {"pct": round(p, 2), "cpu_ms": round(p * ms_per_pct, 1)}
                      for t, p in sorted(share.items(), key=lambda kv: -kv[1]) if p >= 0.05}
    # perf prints percentages with two decimals: at 30K samples one sample
    # is 0.0033%, so the IRQ threads' many small self rows mostly print as
    # 0.00 and their sum undercounts (teardown-profile3: 0.16% against
    # 0.67% by comm). Their inclusive total is the children value of the
    # threads' root (kthread: every sample of theirs is below it), summed
    # over the 32 threads in a few rows that round little.
    irq_rows = [(c, s, f) for c, s, t, f in rows if t == PROFILE_IRQ_TASK]
    irq = max((c for c, _, _ in irq_rows), default=0.0) or share.get(PROFILE_IRQ_TASK)
    if not irq:
        # a profile that missed the teardown (perf ended early, the yank
        # came later) says nothing about it
        out["error"] = f"no sample of a pciehp IRQ thread ({PROFILE_IRQ_TASK})"
        return out
    funcs = sorted(irq_rows, key=lambda r: (-r[0], r[2]))
    out["irq_thread"] = {
        "pct_of_samples": round(irq, 2), "cpu_ms": round(irq * ms_per_pct, 1),
        "functions": [{"function": f.replace("[k] ", "", 1), "children_pct": round(c / irq * 100.0, 1),
                       "self_pct": round(s / irq * 100.0, 1)} for c, s, f in funcs[:PROFILE_TOP]]}
    return out


def _sum_absent(counts):
    """The absent-read counts (lab_absent_summary) of several yanks of one
    size, added up: None when any yank's count is missing (a zero must have
    been read)."""
    if not counts or any(c is None for c in counts):
        return None
    out = {"total": 0, "by_slot": {}, "by_function": {}, "by_symbol": {}}
    for c in counts:
        out["total"] += c.get("total", 0)
        for key in ("by_slot", "by_function", "by_symbol"):
            for k, v in (c.get(key) or {}).items():
                out[key][k] = out[key].get(k, 0) + v
    out["yanks"] = len(counts)
    return out


def lab_disconnect_metrics(passes, runs, platform):
    """disconnect-flag: for each completion timeout (us; "stock" on Debian's
    QEMU) and flag setting (marked: pciehp marks yanked devices
    disconnected; unmarked: pciehp.debug_keep_connected=Y), T(N) and the
    per-phase latencies, unmarked/marked per size, and where each removal's
    teardowns spent their time (breakdown[timeout][flag][N]).
    runs: the size of each bulk removal of a pass, in the order they ran
    (each size lab_disconnect_repeats times, the sizes interleaved). T_ms
    is the median of a size's yanks and T_runs_ms all of them in run order;
    phases and breakdown are those of the median yank (the lower median of
    an even count: a yank that happened, median_yank its index among the
    size's yanks); absent_reads add up every yank of the size.
    T_over_floor_runs: each yank's T(N) over its own teardown floor (the
    CPU time of everything but the I/O load and the lab's instruments in
    that yank's window, divided by the online CPUs, _floors), T_over_floor
    their median (None when a yank's floor was not measured)."""
    sizes = list(dict.fromkeys(int(n) for n in runs))
    out = {"platform": platform, "sizes": sizes, "yanks_per_size": {}, "T_ms": {}, "T_runs_ms": {},
           "median_yank": {}, "unmarked_over_marked": {}, "phases": {}, "breakdown": {}, "absent_reads": {},
           "T_over_floor": {}, "T_over_floor_runs": {}}
    for timeout, flags in (passes or {}).items():
        for flag, reports in flags.items():
            if len(reports) != len(runs):
                raise AnsibleFilterError(f"disconnect-flag {timeout}/{flag}: {len(reports)} reports "
                                         f"for {len(runs)} yanks")
            by_size = {}
            for n, rep in zip(runs, reports):
                by_size.setdefault(str(n), []).append(rep)
            t, t_runs, pick, ph, bd, ab, fl, flr = {}, {}, {}, {}, {}, {}, {}, {}
            for n, reps in by_size.items():
                collects = [((r.get("steps") or {}).get("collect") or {}) for r in reps]
                values = [c.get("last_gone_ms") for c in collects]
                t_runs[n] = values
                # each yank against its own floor (its CPUs' work in its window)
                flr[n] = [_floors(c.get("last_gone_ms"), c.get("cpu_floor_ms"), c.get("cpu_window"))["T_over"]["teardown"]
                          for c in collects]
                known_fl = [v for v in flr[n] if v is not None]
                fl[n] = round(statistics.median(known_fl), 3) if known_fl and len(known_fl) == len(flr[n]) else None
                known = sorted((v, i) for i, v in enumerate(values) if v is not None)
                if known:
                    i = known[(len(known) - 1) // 2][1]
                    t[n] = round(statistics.median(v for v, _ in known), 3)
                else:
                    i, t[n] = 0, None
                pick[n] = i
                ph[n] = lab_removal_metrics([reps[i]])
                bd[n] = lab_breakdown_metrics(reps[i])
                ab[n] = _sum_absent([r.get("absent") for r in reps])
                out["yanks_per_size"][n] = len(reps)
            for key, value in (("T_ms", t), ("T_runs_ms", t_runs), ("median_yank", pick), ("phases", ph),
                               ("breakdown", bd), ("absent_reads", ab), ("T_over_floor", fl),
                               ("T_over_floor_runs", flr)):
                out[key].setdefault(timeout, {})[flag] = value
        t = out["T_ms"].get(timeout) or {}
        marked, unmarked = t.get("marked") or {}, t.get("unmarked") or {}
        out["unmarked_over_marked"][timeout] = {
            n: (round(unmarked[n] / marked[n], 3) if marked.get(n) and unmarked.get(n) is not None else None)
            for n in marked}
    out["clock"] = "guest CLOCK_MONOTONIC via tracefs (trace_clock=mono), 1 us resolution"
    out["note"] = "T_ms: median over a size's yanks (T_runs_ms); phases, breakdown: the median yank's"
    return out


# disconnect-flag's unmarked passes: what a removal costs that waits out a
# completion timeout on every read under pci_rescan_remove_lock
UNMARKED_SYMPTOM = "hung-task"
# ... of a pciehp IRQ thread only (irq/<n>-pciehp): a hung fio, kworker or
# udev task is a finding like any other
UNMARKED_SYMPTOM_TASK = re.compile(r"^INFO: task irq/[0-9]+-pciehp:[0-9]+ blocked for more than [0-9]+ seconds")
UNMARKED_SYMPTOM_STEP = "collect failed (exit 1): kernel-log-clean"
ABSENT_KIND = "absent-read"  # lab_absent.py's finding


def lab_disconnect_judge(passes, runs):
    """disconnect-flag's verdict over every pass: {"reports": [...],
    "unmarked_hung_tasks": {timeout: {N: count}}}. An unmarked pass runs
    pciehp with the debug switch whose cost the scenario measures: with long
    completion timeouts the teardown of one slot holds the rescan lock for
    seconds and the other slots' IRQ threads wait on it, so hung-task
    warnings there (and the collect step failing on them alone) are the
    measured symptom, counted, not a failure. Any other finding, and any
    finding of a marked pass, fails. runs: the size of each yank of a pass
    in run order; the hung-task counts add up a size's yanks."""
    reports, hung = [], {}
    for timeout, flags in (passes or {}).items():
        for flag, reps in flags.items():
            for n, r in zip(runs, reps):
                if flag != "unmarked":
                    reports.append(r)
                    continue
                found = r.get("findings") or []
                symptom = [f for f in found if f.get("kind") == UNMARKED_SYMPTOM
                           and UNMARKED_SYMPTOM_TASK.match(f.get("line", ""))]
                # unmarked devices are read until they are removed: counted
                # in metrics.absent_reads, not failed (a missing count still fails)
                rest = [f for f in found if f not in symptom
                        and not (f.get("kind") == ABSENT_KIND and r.get("absent") is not None)]
                if symptom:
                    rest = [f for f in rest if f.get("line") != UNMARKED_SYMPTOM_STEP]
                per_size = hung.setdefault(str(timeout), {})
                per_size[str(n)] = per_size.get(str(n), 0) + len(symptom)
                # a step that failed for another reason left a finding of its
                # own; the symptom is kept as what it is, an observation (the
                # log window's close finds it again and must know it)
                reports.append(dict(r, ok=not rest, findings=rest,
                                    observations=[f for f in found if f not in rest]))
    return {"reports": reports, "unmarked_hung_tasks": hung}


def lab_apply_expected(records, expected, profile=None):
    """The known failures of each kernel variant applied by the judge
    (lab/plugins/lab_judge.py apply_expected)."""
    try:
        return lab_judge.apply_expected(records, expected, profile)
    except lab_judge.JudgeError as e:
        raise AnsibleFilterError(str(e)) from None


def lab_accel_limits(accels, tcg_limit, kvm_limit):
    """The limits a report states for how its VMs ran: accels is each
    VM's accelerator (summary.json accel; a VM the probe never reached
    counts as tcg). TCG's limit when any VM ran under TCG or no VM ran
    under KVM (a run without VMs claims no hardware speed), KVM's when any
    did; a mixed run states both."""
    accels = [a or "tcg" for a in accels or []]
    return ([tcg_limit] if "tcg" in accels or "kvm" not in accels else []) + \
        ([kvm_limit] if "kvm" in accels else [])


def lab_junit(summary):
    """JUnit XML of a summary: one testsuite, one testcase a (scenario, VM)."""
    from xml.sax.saxutils import escape, quoteattr

    scenarios = summary.get("scenarios", [])
    failures = sum(1 for s in scenarios if s["status"] == "fail")
    skipped = sum(1 for s in scenarios if s["status"] in ("skip", "xfail"))
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name={quoteattr("pciehp-lab " + summary["run_id"])} '
             f'tests="{len(scenarios)}" failures="{failures}" skipped="{skipped}">']
    for s in scenarios:
        name = quoteattr(f'{s["name"]}[{s["vm"]}]')
        lines.append(f'  <testcase classname={quoteattr(summary["kernel"]["variant"])} name={name} '
                     f'time="{s.get("seconds", 0)}">')
        if s["status"] == "fail":
            text = "\n".join(f.get("line", "") for f in s.get("findings", []))
            message = quoteattr(f"{s['failures']}/{s['iterations']} failed")
            lines.append(f'    <failure message={message}>{escape(text)}</failure>')
        elif s["status"] in ("skip", "xfail"):
            reason = "; ".join(s.get("expected_failure", [])) or "skipped"
            lines.append(f"    <skipped message={quoteattr(reason)}/>")
        lines.append(f'    <system-out>{escape(json.dumps(s.get("metrics", {})))}</system-out>')
        lines.append("  </testcase>")
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"


def lab_scenario_seconds(name, records):
    """Wall time of a scenario over all VMs (they run in parallel: the longest)."""
    times = [r.get("seconds", 0) for r in records if r.get("name") == name]
    return max(times) if times else 0


def lab_format_phase(item):
    value = item["value"]
    return f"{item['key']:<28} {float(value):9.2f}" if value is not None else f"{item['key']:<28}       n/a"


def lab_log_window_merge(record, start, end, canary_at=None):
    """A scenario's record with its kernel-log window closed (labprobe
    log-window, run before and after the scenario): the findings of the
    records no scan of the scenario covered are added, and any new finding
    fails the record (a skipped one too: its window was not clean). A
    start or end that failed, or printed no report, is a probe error, never
    a clean window. record["log_window"] keeps since_seq, the scans the
    scenario made, the records only the end scanned, whether the guest
    restarted inside the window, and with lab_canary the scan the canary
    was armed for, where it was written and its line."""
    rec = dict(record)
    new = []
    st = json_object((start or {}).get("stdout", "")) if not (start or {}).get("skipped") else None
    if not st or st.get("since_seq") is None:
        new.append({"kind": "probe-error", "line": "log-window start failed: the scenario's kernel log window "
                    "was not opened", "context": [str((start or {}).get("stderr") or (start or {}).get("msg"))[:300]]})
    en = lab_probe_report((end or {}).get("stdout", ""), (end or {}).get("rc", 1), (end or {}).get("stderr", ""))
    if not en.get("ok") and not en.get("findings"):
        new.append({"kind": "probe-error", "line": f"log-window end failed (exit {(end or {}).get('rc')}): "
                    f"{en.get('error') or 'no finding said why'}", "context": []})
    rec["log_window"] = {"since_seq": (st or {}).get("since_seq"), "scans": en.get("scans"),
                         "unscanned_records": en.get("unscanned_records"), "restarted": en.get("restarted"),
                         "lockdep": [(st or {}).get("lockdep"), en.get("lockdep")],
                         # the records of the VM's log this window covered (lab_log_coverage)
                         "chained": (st or {}).get("chained"), "covered": en.get("covered")}
    if canary_at is not None and str(canary_at) != "":
        rec["log_window"]["canary"] = dict(en.get("canary") or {}, at_scan=int(canary_at))
    new += _lockdep_off_findings(st or {}, en, list(rec.get("findings") or []) + new + list(en.get("findings") or []))
    return add_findings(rec, new + list(en.get("findings") or []))


def lab_log_coverage(covered, from_boot=True):
    """Which records of a VM's kernel log the run's windows covered: covered
    is each window's `covered` (labprobe log-window end and after: boot id,
    after_seq, from_boot, last_seq), a window covering the records of its
    boot after after_seq (from its first record with from_boot) up to
    last_seq. A boot's records are those from its first (from_boot: the
    VM booted in this run; else, a lab_rerun, from the first record a
    window of this run began after) to the last any window saw; a boot's
    records after its last window that a restart erased are not known and
    not counted. {records, in_windows, outside_windows, boots}: outside
    is what no window covered, overlap what more than one did."""
    boots = {}
    for c in covered or []:
        if not isinstance(c, dict) or c.get("last_seq") is None:
            continue
        first = 0 if c.get("from_boot") else int(c.get("after_seq") or 0) + 1
        boots.setdefault(c.get("boot_id"), []).append((first, int(c["last_seq"])))
    out = {"records": 0, "in_windows": 0, "outside_windows": 0, "overlap": 0, "boots": len(boots)}
    for ranges in boots.values():
        lo = 0 if from_boot else min(a for a, _ in ranges)
        hi = max(b for _, b in ranges)
        seen, count = set(), 0
        for a, b in ranges:
            span = set(range(max(a, lo), b + 1))
            count += len(span)
            seen |= span
        out["records"] += hi - lo + 1 if hi >= lo else 0
        out["in_windows"] += len(seen)
        out["overlap"] += count - len(seen)
    out["outside_windows"] = out["records"] - out["in_windows"]
    return out


def lab_vm_log_coverage(vm, records):
    """summary.json log_coverage of one VM: its kernel-log record's, None
    when the VM never got there (lost, or failed to boot: its records say
    why)."""
    for r in records or []:
        if r.get("name") == "kernel-log" and r.get("vm") == vm:
            return (r.get("metrics") or {}).get("log_coverage")
    return None


def lab_log_coverage_findings(coverage):
    """A finding when records of the VM's log were in no window, or in more
    than one: each record belongs to exactly one scanned window."""
    out = []
    if coverage.get("outside_windows"):
        out.append({"kind": "log-coverage", "context": [json.dumps(coverage, sort_keys=True)],
                    "line": f"{coverage['outside_windows']} of {coverage['records']} kernel log record(s) "
                            f"were in no scanned window"})
    if coverage.get("overlap"):
        out.append({"kind": "log-coverage", "context": [json.dumps(coverage, sort_keys=True)],
                    "line": f"{coverage['overlap']} kernel log record(s) were in more than one window"})
    if not coverage.get("records"):
        out.append({"kind": "log-coverage", "context": [], "line": "no window covered any kernel log record"})
    return out


def _lockdep_off_findings(start, end, findings):
    """A window on a lockdep kernel (log-window's "lockdep": "on"/"off";
    None without lockdep) that lockdep was off in checked no locking: off
    at the start (an earlier report of the boot: tasks/scenario-run.yml
    restarts the VM first, so this means the restart did not bring it
    back), or switched off inside the window with no kernel report among
    the findings that would explain it (a kernel-log finding, which has a
    time: lockdep's own report, or one that taints the kernel)."""
    if start.get("lockdep") == "off":
        return [{"kind": "lockdep-off", "line": "lockdep was off when the scenario started: its locking went "
                 "unchecked (an earlier report or taint of this boot switched it off)", "context": []}]
    if start.get("lockdep") == "on" and end.get("lockdep") == "off" and not any("time" in f for f in findings):
        return [{"kind": "lockdep-off", "line": "lockdep switched itself off inside the scenario's window "
                 "without a kernel report the lab recognised: the rest of the window went unchecked", "context": []}]
    return []


def lab_kernel_labels(variants, info):
    """What each kernel variant of the run is, for the results: its own
    name, or a developer's tree's label from its kernel-build manifest
    (tree:<git describe --dirty>)."""
    return {v: (info.get(v) or {}).get("label") or v for v in variants}


class FilterModule:
    def filters(self):
        return {
            "lab_probe_drive_args": lab_probe_drive_args,
            "lab_probe_report": lab_probe_report,
            "lab_read_json": lab_read_json,
            "lab_junit": lab_junit,
            "lab_accel_limits": lab_accel_limits,
            "lab_hpslot_serials": lab_hpslot_serials,
            "lab_removal_metrics": lab_removal_metrics,
            "lab_removal_expect": lab_removal_expect,
            "lab_method_findings": lab_method_findings,
            "lab_breakdown_metrics": lab_breakdown_metrics,
            "lab_scaling_metrics": lab_scaling_metrics,
            "lab_disconnect_metrics": lab_disconnect_metrics,
            "lab_disconnect_judge": lab_disconnect_judge,
            "lab_apply_expected": lab_apply_expected,
            "lab_log_window_merge": lab_log_window_merge,
            "lab_log_coverage": lab_log_coverage,
            "lab_log_coverage_findings": lab_log_coverage_findings,
            "lab_vm_log_coverage": lab_vm_log_coverage,
            "lab_perf_profile": lab_perf_profile,
            "lab_scenario_seconds": lab_scenario_seconds,
            "lab_format_phase": lab_format_phase,
            "lab_kernel_labels": lab_kernel_labels,
        }
