"""Many VMs in one run: what a VM lost on the way leaves in the results,
and failures/iterations per scenario and kernel variant over all VMs."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab_judge import judge_record  # noqa: E402


def _where(at):
    at = at or {}
    if not at.get("scenario"):
        return "before its first scenario"
    if int(at.get("of") or 0) > 0:
        return f"{at['scenario']} iteration {at['iteration']}/{at['of']}"
    return str(at["scenario"])


# What a console line shows, worst first: a panic stops the kernel; a soft
# lockup or an RCU stall (a CPU that did not get to run, which a starved
# host causes too) or an oops does not by itself.
CONSOLE_TROUBLE = (("Kernel panic", "a kernel panic"), ("soft lockup", "a soft lockup"),
                   ("hard LOCKUP", "a hard lockup"), ("rcu: INFO", "an RCU stall"),
                   ("Oops", "an oops"), ("BUG:", "a kernel BUG"))


def _trouble_lines(lines):
    """The console lines that show trouble, with the RIP: lines saying where."""
    return [line for line in lines or [] if "RIP:" in line or any(m in line for m, _ in CONSOLE_TROUBLE)]


def _console_trouble(lines):
    text = "\n".join(lines)
    return next((what for marker, what in CONSOLE_TROUBLE if marker in text),
                "a kernel backtrace" if text else "")


def lab_vm_failure(vm, variant, hypervisor, at, watchdog, console_tail, kernel_log, error=None):
    """The failure record of a VM that stopped during the scenarios: where
    (scenario and iteration it was in), why (the watchdog's reason, a task
    of the lab that failed, or a kernel panic its console shows), and the
    files that hold the evidence."""
    watchdog = watchdog or {}
    panic = _trouble_lines(console_tail)
    reason = watchdog.get("reason") or (f"a task of the lab failed: {error}" if error else
                                        "Ansible lost the VM (its guest agent stopped answering)")
    seen = _console_trouble(panic)
    if seen and seen not in reason:
        reason += "; the console shows " + seen
    return {"vm": vm, "variant": variant, "hypervisor": hypervisor, "where": _where(at),
            "scenario": (at or {}).get("scenario"), "reason": reason,
            "detected_at": watchdog.get("detected_at"), "last_ok_at": watchdog.get("last_ok_at"),
            "console_panic": panic[-20:],
            "files": {"console": f"{vm}/console.log", "kernel_log": f"{vm}/kernel-log.txt"
                      if kernel_log else None}}


def lab_vm_failure_records(failure, records, scenarios, iterations):
    """Records for a failed VM: the scenario it was in fails (with a
    'vm-failed' finding saying where and why), the scenarios it never
    reached are 'skip'. Scenarios it finished keep their own records."""
    done = {r["name"] for r in records}
    out = []
    reached = False
    for name in scenarios:
        if name in done:
            continue
        base = {"name": name, "vm": failure["vm"], "variant": failure["variant"], "seconds": 0}
        if not reached and (failure.get("scenario") in (None, name)):
            reached = True
            rec = judge_record(base, findings=[{
                "kind": "vm-failed", "line": f"{failure['vm']} failed during {failure['where']}: {failure['reason']}",
                "context": failure.get("console_panic", [])}])
            rec["iterations"] = int(iterations)
            out.append(rec)
        else:
            out.append(judge_record(base, skip=f"{failure['vm']} failed earlier ({failure['where']})"))
    return out


def lab_aggregate(records):
    """failures/iterations per (scenario, kernel variant) over every VM."""
    groups = {}
    for r in records:
        key = (r["name"], r.get("variant", ""))
        g = groups.setdefault(key, {"scenario": key[0], "variant": key[1], "vms": [], "iterations": 0,
                                    "failures": 0, "status": {}})
        g["vms"].append(r["vm"])
        g["iterations"] += int(r.get("iterations") or 0)
        g["failures"] += int(r.get("failures") or 0)
        g["status"][r["status"]] = g["status"].get(r["status"], 0) + 1
    out = []
    for g in groups.values():
        g["failure_rate"] = round(g["failures"] / g["iterations"], 4) if g["iterations"] else None
        out.append(g)
    return sorted(out, key=lambda g: (g["scenario"], g["variant"]))


def lab_format_aggregate(g):
    rate = "n/a" if g["failure_rate"] is None else f"{100 * g['failure_rate']:.1f}%"
    return (f"{g['scenario']} [{g['variant']}]: {g['failures']}/{g['iterations']} failed ({rate}) "
            f"over {len(g['vms'])} VM(s)")


def lab_format_vm_failure(f):
    """One line for the run's status; with a panic on the console its key
    lines (what the kernel said first, where, and why it stopped), so a
    CI log shows the crash without the console file."""
    line = f"FAILED VM {f['vm']} ({f['variant']}) during {f['where']}: {f['reason']}"
    panic = f.get("console_panic") or []
    key = []
    for marker in [m for m, _ in reversed(CONSOLE_TROUBLE)] + ["RIP:"]:
        hit = next((p.strip() for p in panic if marker in p), None)
        if hit and hit not in key:
            key.append(hit)
    return line + (" [" + " | ".join(key) + "]" if key else "")


# The lab's QEMU (qemu 0012) traces an I/O access that TCG dispatched to a
# region that does not cover its address: the write of a doorbell or an
# MSI-X entry went to another device. The guest cannot see it.
EMULATOR_FAULTS = ("tcg_io_misdirected",)


def lab_emulator_records(vm, variant, paths):
    """A failed 'emulator' record of a VM whose QEMU trace files (the run's
    and those kept before each restart) hold an emulator fault, else none:
    what that VM's guest did may not be what reached its devices."""
    lines = []
    for path in sorted(paths or []):
        try:
            with open(path, errors="replace") as f:
                lines += [line.rstrip("\n") for line in f if any(e in line for e in EMULATOR_FAULTS)]
        except OSError:
            continue
    if not lines:
        return []
    rec = judge_record({"name": "emulator", "vm": vm, "variant": variant, "seconds": 0},
                       metrics={"misdirected": len(lines)},
                       findings=[{"kind": "emulator",
                                  "line": f"QEMU dispatched {len(lines)} I/O access(es) of {vm} to a region that "
                                          f"does not cover it (tcg_io_misdirected): a write may have gone to "
                                          f"another device", "context": lines[:20]}])
    rec["iterations"] = 1
    return [rec]


class FilterModule:
    def filters(self):
        return {
            "lab_vm_failure": lab_vm_failure,
            "lab_vm_failure_records": lab_vm_failure_records,
            "lab_emulator_records": lab_emulator_records,
            "lab_aggregate": lab_aggregate,
            "lab_format_aggregate": lab_format_aggregate,
            "lab_format_vm_failure": lab_format_vm_failure,
        }
