"""The bus rescan loop beside a scenario (lab_rescan_loop): what
`labprobe rescan-loop start` and `stop` reported, folded into the
scenario's record.

A scenario runs with the loop in one segment, from the start before it to
the stop after it; a scenario that restarts the VM (steps/vm-restart.yml)
stops the loop before the restart and starts it again after, so each boot
is a segment of its own. The record gets

  rescan_loop  rescans, errors, ran_ms summed over the segments,
               running_at_stop (every segment's loop ran until its stop),
               rescan_ms (the longest write to /sys/bus/pci/rescan, and the
               mean), interval_ms and each segment's own numbers;
  lock_stat    the /proc/lock_stat rows of pci_rescan_remove_lock (times in
               us): counts and totals summed over the segments, minima and
               maxima of them, averages recomputed; null on a kernel
               without lock statistics (lock_stat_note says so);

and a finding for each problem of the loop (kind rescan-loop: it did not
start, died, could not be stopped because a rescan stayed blocked in the
kernel, or a write failed) and each kernel log finding of the loop's window
that the scenario did not already report (the loop's stop scans the log
from its start). A new finding fails the record.
"""

import json
import os
import sys

# shared helpers, one copy (lab/plugins/lab_common.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab_judge import add_findings  # noqa: E402

LOOP_KIND = "rescan-loop"
COUNTS = ("con_bounces", "contentions", "acq_bounces", "acquisitions")


def _report(step):
    """A registered labprobe step's JSON report; None when the step did not
    run (skipped) or printed no JSON ({'error': ...} then)."""
    if not isinstance(step, dict) or step.get("skipped"):
        return None
    out = (step.get("stdout") or "").strip()
    try:
        rep = json.loads(out)
        if isinstance(rep, dict):
            return rep
    except ValueError:
        pass
    err = (step.get("stderr") or step.get("msg") or "").strip()
    return {"ok": False, "error": f"no JSON from labprobe (exit {step.get('rc')}): {(out or err)[:300]}"}


def _combine_rows(rows):
    """One lock_stat row of several segments' rows of a class."""
    rows = [r for r in rows if r]
    if not rows:
        return None
    out = {k: sum(int(r.get(k, 0)) for r in rows) for k in COUNTS}
    for kind, count in (("waittime", "contentions"), ("holdtime", "acquisitions")):
        had = [r for r in rows if int(r.get(count, 0)) > 0]
        total = round(sum(float(r.get(f"{kind}_total_us", 0)) for r in rows), 2)
        out[f"{kind}_min_us"] = min(float(r[f"{kind}_min_us"]) for r in had) if had else 0.0
        out[f"{kind}_max_us"] = max(float(r[f"{kind}_max_us"]) for r in had) if had else 0.0
        out[f"{kind}_total_us"] = total
        out[f"{kind}_avg_us"] = round(total / out[count], 2) if out[count] else 0.0
    return out


def lab_rescan_lock_stat(stops):
    """The lock statistics of the loop's segments (each stop's lock_stat):
    {time_unit, lock_debugging, classes: {class: row}}, or None when no
    segment had any (a kernel without CONFIG_LOCK_STAT)."""
    stats = [s.get("lock_stat") for s in stops if isinstance(s, dict) and s.get("lock_stat")]
    if not stats:
        return None
    names = []
    for s in stats:
        names += [n for n in (s.get("classes") or {}) if n not in names]
    return {"time_unit": "us",
            "lock_debugging": all(s.get("lock_debugging", True) for s in stats),
            "segments": len(stats),
            "classes": {n: _combine_rows([(s.get("classes") or {}).get(n) for s in stats]) for n in names}}


def _segment(seg):
    start, stop = _report(seg.get("start")), _report(seg.get("stop"))
    problems = []
    if start is None:
        problems.append("the rescan loop was not started")
    elif not start.get("ok"):
        problems.append(f"the rescan loop did not start: {start.get('error', 'start failed')}")
    if start and start.get("ok"):
        if stop is None:
            problems.append("the rescan loop was not stopped")
        else:
            state = stop.get("state")
            if stop.get("stuck"):
                problems.append(f"the rescan loop could not be stopped: a rescan was blocked in the kernel "
                                f"for {stop.get('in_rescan_ms')} ms")
            elif state in ("died", "none", "rebooted"):
                problems.append(f"the rescan loop was not running at its stop ({state}): {stop.get('note', '')}")
            elif not state:
                problems.append(f"the rescan loop's stop failed: {stop.get('error', 'no state')}")
            if stop.get("errors"):
                problems.append(f"{stop['errors']} write(s) to /sys/bus/pci/rescan failed "
                                f"(and {stop.get('rescans')} succeeded): {stop.get('last_error')}")
    stop = stop or {}
    return {
        "ended_by": seg.get("ended_by", "scenario end"),
        "state": stop.get("state"),
        "running_at_stop": bool(stop.get("running_at_stop")),
        "rescans": stop.get("rescans"),
        "errors": stop.get("errors"),
        "ran_ms": stop.get("ran_ms"),
        "rescan_ms": stop.get("rescan_ms"),
        "interval_ms": (start or {}).get("interval_ms"),
        "lock_stat_reset": (start or {}).get("lock_stat_reset"),
    }, stop, problems


def lab_rescan_summary(segments):
    """(rescan_loop, lock_stat, findings) of the loop's segments: each
    {'start': registered start step, 'stop': registered stop step,
    'ended_by': 'scenario end' | 'restart'}."""
    segs, stops, findings = [], [], []
    for seg in segments or []:
        s, stop, problems = _segment(seg)
        segs.append(s)
        stops.append(stop)
        findings += [{"kind": LOOP_KIND, "line": p, "context": []} for p in problems]
        findings += [f for f in stop.get("findings") or [] if isinstance(f, dict)]
    ran = [s for s in segs if s["rescans"] is not None]
    mean_parts = [(s["rescan_ms"] or {}).get("mean") for s in ran]
    done = sum(int(s["rescans"] or 0) + int(s["errors"] or 0) for s in ran)
    loop = {
        "interval_ms": next((s["interval_ms"] for s in segs if s["interval_ms"]), None),
        "rescans": sum(int(s["rescans"] or 0) for s in ran) if ran else None,
        "errors": sum(int(s["errors"] or 0) for s in ran) if ran else None,
        "ran_ms": round(sum(float(s["ran_ms"] or 0) for s in ran), 3) if ran else None,
        "running_at_stop": bool(segs) and all(s["running_at_stop"] for s in segs),
        "rescan_ms": {
            "max": max((float((s["rescan_ms"] or {}).get("max") or 0) for s in ran), default=None),
            "mean": round(sum(float(m) * (int(s["rescans"] or 0) + int(s["errors"] or 0))
                              for s, m in zip(ran, mean_parts) if m is not None) / done, 3) if done else None,
        },
        "segments": segs,
    }
    return loop, lab_rescan_lock_stat(stops), findings


def lab_rescan_merge(record, segments):
    """The scenario's record with rescan_loop and lock_stat, and the loop's
    new findings (failing it)."""
    rec = dict(record)
    loop, lock_stat, found = lab_rescan_summary(segments)
    rec["rescan_loop"] = loop
    rec["lock_stat"] = lock_stat
    if lock_stat is None:
        notes = [_report(s.get("stop")) or {} for s in segments or []]
        rec["lock_stat_note"] = next((n.get("lock_stat_note") for n in notes if n.get("lock_stat_note")),
                                     "no lock statistics (no segment's stop read /proc/lock_stat)")
    return add_findings(rec, found)


class FilterModule:
    def filters(self):
        return {
            "lab_rescan_merge": lab_rescan_merge,
            "lab_rescan_summary": lab_rescan_summary,
            "lab_rescan_lock_stat": lab_rescan_lock_stat,
        }
