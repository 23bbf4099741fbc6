"""Filters of the power-management scenarios (runtime-pm, system-sleep):
the ACPI call trace the thunderbolt firmware writes to the debug port,
the roles of the slots, and the checks of each step.

What the kernel does is decided by the 6.1 source; each check says which
line of it the expectation comes from, so a failure points at the code:
- pci_pm_init() (drivers/pci/pci.c) returns before setting bridge_d3 and
  d3cold_allowed when the port has no PCI PM capability (QEMU's
  pcie-root-port has none), so such a port starts with bridge_d3 = 0.
- pcie_portdrv_probe() allows runtime PM (power/control = auto, 100 ms
  autosuspend) when pci_bridge_d3_possible() holds: for a hotplug port the
  firmware opt-in (_S0W >= D3hot and power manageable, or
  HotPlugSupportInD3), or pcie_port_pm=force; it does not look at the PM
  capability.
- pcie_port_runtime_idle()/_suspend() refuse while bridge_d3 = 0.
  pci_bridge_d3_update() sets bridge_d3 when a child is added and keeps it
  when the child is removed: a port that once held a device can suspend,
  a port that never held one cannot (without a PM capability).
- acpi_pci_choose_state() caps the target at D3hot while d3cold_allowed = 0;
  the sysfs knob d3cold_allowed sets it.
- pci_dev_run_wake() is false without PME support, so runtime suspend
  never enables wake: no _DSW(1, ...) at runtime suspend on such a port.
"""

import re

TRACE_RE = re.compile(r"^pciehp-lab-acpi (\d+) (\d+) (\S+) (\S+)(?: (.*))?$")


def lab_acpi_trace(text):
    """Trace lines of domains/acpi/thunderbolt-port.asl.j2 from a debugcon
    log: [{seq, ticks, object, method, args}] in order (other writers to
    port 0x402, such as SeaBIOS, are skipped)."""
    out = []
    for line in str(text or "").splitlines():
        m = TRACE_RE.match(line.strip())
        if m:
            out.append({"seq": int(m.group(1)), "ticks": int(m.group(2)), "object": m.group(3),
                        "method": m.group(4), "args": (m.group(5) or "").split()})
    return out


def lab_trace_since(trace, seq):
    return [t for t in trace if t["seq"] > int(seq or 0)]


def _between(trace, after, upto):
    """Trace records with after < seq <= upto (upto None: to the end)."""
    return [t for t in lab_trace_since(trace, after) if upto is None or t["seq"] <= int(upto)]


def lab_trace_last_seq(trace):
    return trace[-1]["seq"] if trace else 0


def _calls(trace, acpi_name):
    """"_PS3", "PW18._OFF", "_DSW 0 0 0" ... of one port, in order."""
    out = []
    for t in trace:
        obj = t["object"]
        if obj == acpi_name:
            out.append(" ".join([t["method"]] + t["args"]))
        elif obj.startswith(acpi_name + "."):
            out.append(obj.split(".", 1)[1] + "." + t["method"])
    return out


def lab_trace_lines(trace, limit=80):
    """A trace as short text lines for results."""
    return [f"{t['seq']} {t['ticks']} {t['object']} {' '.join([t['method']] + t['args'])}"
            for t in trace][-limit:]


def lab_pm_roles(slot_map):
    """The slots runtime-pm and system-sleep use: tb_drive (thunderbolt port
    with a drive at boot), tb_empty (thunderbolt port empty at boot),
    plain_drive and plain_empty; None where the profile has none."""
    def first(fw, drive):
        for s in slot_map:
            if (s.get("firmware", "plain") != "plain") == fw and bool(s.get("drive")) == drive:
                return s
        return None
    roles = {"tb_drive": first(True, True), "tb_empty": first(True, False),
             "plain_drive": first(False, True), "plain_empty": first(False, False)}
    return {k: ({"slot": v["slot"], "address": v["address"], "acpi_name": v.get("acpi_name"),
                 "power_resource": v.get("power_resource")} if v else None) for k, v in roles.items()}


def lab_pm_missing_roles(roles, needed):
    return [r for r in needed if not roles.get(r)]


def _ports(report):
    return {str(p.get("slot")): p for p in (report or {}).get("ports", [])}


class _Checks:
    def __init__(self):
        self.list = []

    def add(self, ok, name, detail, why=""):
        self.list.append({"name": name, "ok": bool(ok), "detail": detail, "why": why})

    def failed(self):
        return [c for c in self.list if not c["ok"]]


def _removable(port):
    return [b.get("removable") for b in (port or {}).get("below", [])]


def _in_order(calls, wanted):
    """Is `wanted` a subsequence of calls?"""
    it = iter(calls)
    return all(any(c == w for c in it) for w in wanted)


def lab_runtime_pm_report(roles, boot, removed, d3cold, wake, pme, view, trace, seqs, log):
    """Checks of the runtime-pm scenario (see playbooks/scenarios/runtime-pm.yml).
    boot/removed/d3cold/wake: labprobe pm reports (dicts, or None when the
    step did not run); pme: labprobe pme --collect over the hot-add (its
    kprobe_hits.pme_work counts the PME service's work runs); view: labprobe
    view of the re-added slot; trace: the whole ACPI trace; seqs: trace seq before each step {removed, d3cold,
    hotadd, touch}; log: kernel log lines since the hot-add."""
    c = _Checks()
    A, E, P, Q = (roles[k] for k in ("tb_drive", "tb_empty", "plain_drive", "plain_empty"))
    b = _ports(boot)
    force = bool((boot or {}).get("pcie_port_pm_force"))
    caps = {s: b.get(str(s), {}).get("pm_cap") for s in [r["slot"] for r in (A, E, P, Q) if r]}
    a_cap = caps.get(A["slot"])
    e_cap = caps.get(E["slot"])

    # 1. boot: what the firmware and the kernel made of each port
    for r in (A, E):
        p = b.get(str(r["slot"]), {})
        c.add(p.get("acpi_path") == f"\\_SB_.PCI0.{r['acpi_name']}_", f"slot {r['slot']} firmware node",
              f"acpi_path {p.get('acpi_path')}")
        c.add(p.get("control") == "auto" and p.get("autosuspend_delay_ms") == "100",
              f"slot {r['slot']} runtime PM allowed",
              f"control {p.get('control')}, autosuspend_delay_ms {p.get('autosuspend_delay_ms')}",
              "pci_bridge_d3_possible(): _S0W D3cold + _PR0/_PS0 (acpi_pci_bridge_d3) -> pcie_portdrv_probe "
              "allows runtime PM with a 100 ms autosuspend (seed 010)")
        calls = _calls(lab_trace_since(trace, 0), r["acpi_name"])
        for m in ("_S0W", "_PRW", "_DSW 0 0 0", f"{r['power_resource']}._ON", "_PS0"):
            c.add(m in calls, f"slot {r['slot']} boot trace has {m}", f"{len(calls)} calls",
                  "acpi scan: _PRW and _DSW(0,0,0) (scan.c), power resources on and _PS0 (device_pm.c)")
    for r in (P, Q):
        if not r:
            continue
        p = b.get(str(r["slot"]), {})
        want = "auto" if force else "on"
        c.add(p.get("control") == want, f"slot {r['slot']} (plain) power/control {want}",
              f"control {p.get('control')}, pcie_port_pm=force {force}",
              "native hotplug ports are not runtime-PM'd unless firmware opts in or pcie_port_pm=force "
              "(pci_bridge_d3_possible)")
    e = b.get(str(E["slot"]), {})
    if e_cap:
        c.add(e.get("runtime_status") == "suspended", f"slot {E['slot']} (empty, PM capability) suspended",
              f"runtime_status {e.get('runtime_status')}")
    else:
        c.add(e.get("runtime_status") == "active" and len(e.get("changes", [])) == 1,
              f"slot {E['slot']} (empty since boot, no PM capability) never suspends",
              f"runtime_status {e.get('runtime_status')}, changes {e.get('changes')}",
              "pci_pm_init() returns before bridge_d3 is set when pm_cap is 0; no child ever called "
              "pci_bridge_d3_update(), so pcie_port_runtime_idle() returns -EBUSY")
    if P:
        removable = _removable(b.get(str(P["slot"])))
        c.add(removable and all(x in (None, "fixed", "unknown") for x in removable),
              f"slot {P['slot']} (plain) device not removable", f"removable {removable}")
    removable = _removable(b.get(str(A["slot"])))
    c.add(removable and all(x == "removable" for x in removable),
          f"slot {A['slot']} device below an ExternalFacingPort is removable", f"removable {removable}",
          "pci_acpi_set_external_facing() + pci_set_removable()/arch_pci_dev_is_removable()")

    # 2. the drive removed: the port that held it suspends
    rp = _ports(removed)
    a = rp.get(str(A["slot"]), {})
    c.add(removed is not None and a.get("runtime_status") == "suspended",
          f"slot {A['slot']} suspends once empty", f"runtime_status {a.get('runtime_status')}, "
          f"reached after {a.get('reached_after_s')} s",
          "pci_bridge_d3_update() keeps bridge_d3 set when the child is removed")
    want = "D3cold" if a_cap else "D3hot"
    c.add(a.get("power_state") == want, f"slot {A['slot']} runtime suspend goes to {want}",
          f"power_state {a.get('power_state')}, d3cold_allowed {a.get('d3cold_allowed')}",
          "acpi_pci_choose_state(): D3hot at most while d3cold_allowed = 0 (pci_pm_init sets it only with pm_cap)")
    calls = _calls(_between(trace, seqs.get("removed"), seqs.get("d3cold")), A["acpi_name"])
    c.add("_PS3" in calls, f"slot {A['slot']} trace: _PS3 at runtime suspend", f"calls {calls}")
    if not a_cap:
        c.add(f"{A['power_resource']}._OFF" not in calls, f"slot {A['slot']} D3hot keeps the power resource on",
              f"calls {calls}", "the resource is in _PR3 too")
    if P:
        pp = rp.get(str(P["slot"]), {})
        want = "suspended" if force else "active"
        c.add(pp.get("runtime_status") == want, f"slot {P['slot']} (plain) {want} once empty",
              f"runtime_status {pp.get('runtime_status')}, power_state {pp.get('power_state')}, force {force}")
    e = rp.get(str(E["slot"]), {})
    if not e_cap:
        c.add(e.get("runtime_status") == "active", f"slot {E['slot']} still active", f"{e.get('runtime_status')}")

    # 3. d3cold_allowed: D3cold, the power resource off
    dp = _ports(d3cold)
    a = dp.get(str(A["slot"]), {})
    c.add(a.get("runtime_status") == "suspended" and a.get("power_state") == "D3cold"
          and a.get("real_power_state") == "D3cold", f"slot {A['slot']} in D3cold",
          f"runtime_status {a.get('runtime_status')}, power_state {a.get('power_state')}, "
          f"real_power_state {a.get('real_power_state')}")
    calls = _calls(_between(trace, seqs.get("d3cold"), seqs.get("hotadd")), A["acpi_name"])
    c.add(_in_order(calls, ["_PS3", f"{A['power_resource']}._OFF"]), f"slot {A['slot']} trace: _PS3 then _OFF",
          f"calls {calls}", "acpi_device_set_power(): _PS3 before the power resources go off")
    dsw = [x for x in calls if x.startswith("_DSW 1")]
    if a_cap:
        c.add(bool(dsw), f"slot {A['slot']} trace: _DSW enables wake before D3cold", f"calls {calls}")
    else:
        c.add(not dsw, f"slot {A['slot']} no _DSW at runtime suspend (no PME capability)", f"calls {calls}",
              "pci_finish_runtime_suspend(): __pci_enable_wake(dev, t, pci_dev_run_wake(dev)) and "
              "pci_dev_run_wake() is false without pme_support: not observable on stock QEMU")
    e = dp.get(str(E["slot"]), {})
    if not e_cap:
        c.add(e.get("runtime_status") == "active", f"slot {E['slot']} stays active with d3cold_allowed=1",
              f"{e.get('runtime_status')}", "d3cold_allowed does not set bridge_d3")

    # 4. hot-add while in D3cold, then a config access
    w = _ports(wake).get(str(A["slot"]), {})
    changes = w.get("changes", [])
    woke_before_touch = [x for x in changes if x["runtime_status"] != "suspended"
                         and x["t_s"] < (wake or {}).get("touched_at_s", 1e9)]
    pme_work = ((pme or {}).get("kprobe_hits") or {}).get("pme_work")
    woken_by = (("PME" if pme_work else "hotplug event") if woke_before_touch
                else ("config access" if w.get("reached_after_s") is not None else "nothing"))
    if a_cap:
        c.add(bool(woke_before_touch) and (pme_work or 0) > 0,
              f"slot {A['slot']} the hot-add's PME wakes the port before any access",
              f"changes {changes}, touched at {(wake or {}).get('touched_at_s')}, "
              f"PME service work ran {pme_work} time(s)",
              "pci_finish_runtime_suspend() enables PME (pme_support has D3cold); the slot event raises PME, "
              "pcie_pme_irq() -> pcie_pme_work_fn() -> pm_request_resume() of the port (seeds 001-004)")
    else:
        c.add(not woke_before_touch and not pme_work, f"slot {A['slot']} nothing wakes the port on a hot-add",
              f"changes {changes}, PME service work ran {pme_work} time(s)",
              "HPIE masked by pciehp_suspend (QEMU latches PDC/ABP), PME not emulated "
              "(QEMU hw/pci/pcie.c pcie_cap_root_init), no GPE: not observable on stock QEMU")
    c.add(w.get("reached_after_s") is not None,
          f"slot {A['slot']} " + ("active after the hot-add" if a_cap else "a config access wakes the port"),
          f"changes {changes}, touched at {(wake or {}).get('touched_at_s')}",
          "pci_config_pm_runtime_get() resumes a device in D3cold (pci.c)")
    calls = _calls(lab_trace_since(trace, seqs.get("touch")), A["acpi_name"])
    c.add(_in_order(calls, [f"{A['power_resource']}._ON", "_PS0"]), f"slot {A['slot']} trace: _ON then _PS0",
          f"calls {calls}")
    vw = view or {}
    c.add(bool(vw.get("ok")), f"slot {A['slot']} the hot-added drive is bound", f"view ok {vw.get('ok')}")
    slot_re = re.compile(rf"Slot\({A['slot']}\)")
    mine = [line for line in log if slot_re.search(line)]
    present = [line for line in mine if "Card present" in line]
    gone = [line for line in mine if "Card not present" in line or "Link Down" in line]
    c.add(len(present) == 1 and not gone, f"slot {A['slot']} brought up once, no stale event",
          f"{len(present)} 'Card present', {len(gone)} 'Card not present'/'Link Down'",
          "pciehp_runtime_resume() + pciehp_check_presence() vs the latched PDC (seeds 003, 004)")
    untrusted = [line for line in log if "marking as untrusted" in line]
    c.add(bool(untrusted), f"slot {A['slot']} new device marked untrusted", f"{untrusted[:2]}",
          "set_pcie_untrusted() via arch_pci_dev_is_removable(): root port external_facing")
    return {"ok": not c.failed(), "checks": c.list, "woken_by": woken_by,
            "pm_cap": caps, "pcie_port_pm_force": force,
            "active_to_suspended_ms": _active_to_suspended(_ports(d3cold).get(str(A["slot"]), {}))}


def _active_to_suspended(port):
    """Milliseconds from each time the port was seen active to it being seen
    suspended again (the 100 ms autosuspend delay plus the suspend itself,
    polled every 10 ms): seed 010's autosuspend as measured, not asserted."""
    out, since = [], None
    for ch in port.get("changes", []):
        if ch.get("runtime_status") == "active":
            since = ch["t_s"]
        elif ch.get("runtime_status") == "suspended" and since is not None:
            out.append(round((ch["t_s"] - since) * 1000, 1))
            since = None
    return out


def _wake_irq(log, wake_irq_file):
    """The IRQ that ended the last sleep: /sys/power/pm_wakeup_irq, else the
    last 'Triggering wakeup from IRQ N' line (pm_debug_messages)."""
    try:
        return int(str(wake_irq_file).strip())
    except ValueError:
        hits = [re.search(r"Triggering wakeup from IRQ (\d+)", line) for line in log]
        hits = [int(h.group(1)) for h in hits if h]
        return hits[-1] if hits else None


def _sleep_window(log):
    """Kernel log lines from entering to leaving suspend-to-idle."""
    start = [i for i, line in enumerate(log) if "PM: suspend-to-idle" in line]
    end = [i for i, line in enumerate(log) if "resume from suspend-to-idle" in line]
    if not start or not end:
        return None
    return log[start[-1]:end[-1] + 1]


def _log_time(line):
    m = re.match(r"\[\s*(\d+\.\d+)\]", line)
    return float(m.group(1)) if m else None


CLOCK_MARK = "labprobe: acpi-clock mark"
# Calls this close to an edge of the sleep window are not judged "asleep":
# suspend_noirq ends and resume_noirq starts microseconds from the window's
# log lines, and jiffies (the ACPI Timer) lag the printk clock by up to a
# tick plus interrupt latency under TCG. A method during an 8 s sleep is
# seconds inside.
CLOCK_GUARD_S = 0.05


def _clock_marks(log, records, pr):
    """How the ACPI Timer maps onto the kernel log's clock. 6.1's Timer
    opcode is jiffies since boot (acpi_os_get_timer), the log's time is
    local_clock(); they differ by a boot-time offset (0.27 s seen under TCG)
    and may drift. The scenario brackets a read of the power resource's _STA
    (traced) between two /dev/kmsg lines before the sleep and after the
    resume; each bracket gives (offset_s, uncertainty_s). Returns
    (pre, post) or None when the log or the trace lacks them."""
    brackets, begin = [], None
    for line in log:
        if CLOCK_MARK not in line:
            continue
        if line.rstrip().endswith("begin"):
            begin = _log_time(line)
        elif line.rstrip().endswith("end") and begin is not None:
            brackets.append((begin, _log_time(line)))
            begin = None
    stas = [t for t in records if t["object"].split(".")[-1] == pr and t["method"] == "_STA"]
    if len(brackets) < 2 or len(stas) < 2 or None in brackets[0] + brackets[-1]:
        return None

    def fit(bracket, sta):
        mid, half = (bracket[0] + bracket[1]) / 2, (bracket[1] - bracket[0]) / 2
        return {"offset_s": round(mid - sta["ticks"] / 1e7, 4), "uncertainty_s": round(half, 4)}
    return fit(brackets[0], stas[0]), fit(brackets[-1], stas[-1])


def _asleep(records, window, marks):
    """Trace records that ran inside the suspend-to-idle window: placed on
    the log's clock with the offset measured before the sleep and with the
    one measured after it, inside by more than the guard with both (a Timer
    that stood still while asleep shifts only the post offset)."""
    start, end = _log_time(window[0]), _log_time(window[-1])
    pre, post = marks
    guard = CLOCK_GUARD_S + max(pre["uncertainty_s"], post["uncertainty_s"])
    out = []
    for t in records:
        at_pre, at_post = t["ticks"] / 1e7 + pre["offset_s"], t["ticks"] / 1e7 + post["offset_s"]
        if at_pre > start + guard and at_post < end - guard:
            out.append(f"{t['object']} {t['method']} at {at_pre:.3f} s")
    return out


def lab_system_sleep_report(roles, cases, trace, sci_irq=9):
    """Checks of system-sleep (playbooks/scenarios/system-sleep.yml). cases:
    {name: {before, after: labprobe pm reports; view: labprobe view report;
    log: kernel log lines since the case began; wake_irq: pm_wakeup_irq's
    text; seq: trace seq before the sleep; hotadd: bool}} for 'runtime'
    (the port left runtime-suspended, power/wakeup as the kernel set it) and
    'wake' (power/wakeup enabled, as seed 005 does for a bridge_d3 port)."""
    c = _Checks()
    A = roles["tb_drive"]
    pr = A["power_resource"]
    out = {}
    for name, case in cases.items():
        before = _ports(case.get("before")).get(str(A["slot"]), {})
        after = _ports(case.get("after")).get(str(A["slot"]), {})
        log = case.get("log") or []
        window = _sleep_window(log)
        records = [t for t in _between(trace, case.get("seq"), case.get("seq_end"))
                   if t["object"].split(".")[0] == A["acpi_name"]]
        # the clock marks' _STA reads are the lab's, not the kernel's
        calls = [x for x in _calls(records, A["acpi_name"]) if x != pr + "._STA"]
        marks = _clock_marks(log, records, pr)
        asleep = _asleep(records, window, marks) if window and marks else None
        irq = _wake_irq(log, case.get("wake_irq", ""))
        c.add(before.get("runtime_status") == "suspended" and before.get("power_state") == "D3cold",
              f"{name}: slot {A['slot']} in D3cold before the sleep",
              f"{before.get('runtime_status')} {before.get('power_state')} wakeup {before.get('wakeup')}")
        c.add(window is not None, f"{name}: the guest entered and left suspend-to-idle",
              f"{len(log)} log lines since the case began")
        c.add(irq == sci_irq, f"{name}: woken by the ACPI SCI (the lab's power button), not by the port",
              f"wake irq {irq}, the port's irqs counted {before.get('irq_count')} -> {after.get('irq_count')}",
              "seed 002: a port's own hotplug interrupt must not wake the system")
        c.add(asleep == [], f"{name}: no ACPI method of the port ran while asleep",
              f"{asleep} (Timer to log clock: before {marks[0] if marks else None}, "
              f"after {marks[1] if marks else None})" if marks else
              "no acpi-clock mark pair in the log and trace: the calls cannot be placed against the sleep",
              f"ACPI Timer (jiffies) placed on the log's clock by a traced {pr}._STA read between two kmsg "
              f"lines before and after; {CLOCK_GUARD_S * 1000:.0f} ms guard at the window's edges")
        port_lines = [line for line in (window or []) if f"Slot({A['slot']})" in line or A["address"] in line]
        c.add(window is not None and not port_lines, f"{name}: nothing from the port while asleep",
              f"{port_lines[:3]}")
        if name == "runtime":
            c.add(after.get("runtime_status") == "suspended" and after.get("power_state") == "D3cold",
                  f"{name}: slot {A['slot']} still in D3cold after resume",
                  f"{after.get('runtime_status')} {after.get('power_state')}",
                  "DPM_FLAG_SMART_SUSPEND and pci_dev_need_resume() false: pci_pm_suspend() leaves it")
            c.add(not [x for x in calls if x.startswith("_DSW")] and
                  _in_order(calls, [pr + "._ON", "_PS0", "_PS3", pr + "._OFF"]),
                  f"{name}: powered up at resume, back to D3cold by runtime PM, no _DSW", f"calls {calls}",
                  "pci_pm_suspend() leaves it suspended (DPM_FLAG_SMART_SUSPEND, pci_dev_need_resume() false), "
                  "but portdrv does not set DPM_FLAG_MAY_SKIP_RESUME, so pci_pm_resume_noirq() powers it up "
                  "(_ON, _PS0) and runtime PM suspends it again")
        else:
            wanted = [pr + "._ON", "_PS0", "_DSW 1 0 3", "_PS3", pr + "._OFF", pr + "._ON", "_PS0", "_DSW 0 0 0"]
            c.add(_in_order(calls, wanted), f"{name}: trace resume, _DSW(1), _PS3, _OFF; then _ON, _PS0, _DSW(0)",
                  f"calls {calls}",
                  "pci_pm_suspend() resumes it (acpi_pci_need_resume: wakeup enabled), pci_prepare_to_sleep(): "
                  "acpi_pci_wakeup() -> _DSW, then D3cold; resume_noirq powers it up, pci_enable_wake(off)")
        if case.get("hotadd"):
            view = case.get("view") or {}
            c.add(bool(view.get("ok")), f"{name}: the drive added during sleep is bound after resume",
                  f"view ok {view.get('ok')}")
            mine = [line for line in log if f"Slot({A['slot']})" in line]
            present = [line for line in mine if "Card present" in line]
            gone = [line for line in mine if "Card not present" in line or "Link Down" in line]
            c.add(len(present) == 1 and not gone, f"{name}: brought up once, no stale event",
                  f"{len(present)} 'Card present', {len(gone)} 'Card not present'/'Link Down'")
        else:
            view = case.get("view") or {}
            c.add(bool(view.get("ok")), f"{name}: slot {A['slot']} empty as QEMU has it", f"view ok {view.get('ok')}")
        out[name] = {"wake_irq": irq, "calls": calls,
                     "timer_to_log_clock": list(marks) if marks else None,
                     "slept_log": (window or [])[:1] + (window or [])[-1:]}
    return {"ok": not c.failed(), "checks": c.list, "cases": out}


def lab_pm_findings(report, name):
    return [{"kind": name, "line": f"{ch['name']}: {ch['detail']}", "context": [ch["why"]] if ch["why"] else []}
            for ch in report["checks"] if not ch["ok"]]


class FilterModule:
    def filters(self):
        return {
            "lab_acpi_trace": lab_acpi_trace,
            "lab_trace_since": lab_trace_since,
            "lab_trace_last_seq": lab_trace_last_seq,
            "lab_trace_lines": lab_trace_lines,
            "lab_pm_roles": lab_pm_roles,
            "lab_pm_missing_roles": lab_pm_missing_roles,
            "lab_runtime_pm_report": lab_runtime_pm_report,
            "lab_system_sleep_report": lab_system_sleep_report,
            "lab_pm_findings": lab_pm_findings,
        }
