"""Reads that reached a removed device, as the fidelity QEMU counts them
(qemu/patches/0009, `hpslot absent`), named by the guest kernel function
that made them.

QEMU records the guest instruction pointer of each such read. The guest's
kernel is relocated (KASLR), so a pointer is mapped back with the guest's
address of _stext (read from its /proc/kallsyms) and the kernel build's
System.map on the controller.
"""

import bisect
import json
import pathlib

TEXT_TYPES = set("TtWw")
ABSENT_KIND = "absent-read"

_maps = {}


def _system_map(path):
    """Sorted text symbols of a System.map: (addresses, names), cached."""
    if path not in _maps:
        syms = []
        for line in pathlib.Path(path).read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] in TEXT_TYPES:
                syms.append((int(parts[0], 16), parts[2]))
        syms.sort()
        _maps[path] = ([a for a, _ in syms], [n for _, n in syms])
    return _maps[path]


def lab_ksym(pc, guest_stext, system_map):
    """'function+0xoff' for a guest kernel address, or the address itself
    when it cannot be named (no map, no _stext, outside the kernel's text)."""
    try:
        addr = int(str(pc), 16)
    except ValueError:
        return str(pc)
    if not system_map or not guest_stext or not pathlib.Path(system_map).is_file():
        return str(pc)
    addrs, names = _system_map(system_map)
    try:
        stext = addrs[names.index("_stext")]
    except ValueError:
        return str(pc)
    addr -= int(str(guest_stext), 16) - stext
    i = bisect.bisect_right(addrs, addr) - 1
    if i < 0 or addr >= addrs[-1] + 0x100000:
        return str(pc)
    return f"{names[i]}+{addr - addrs[i]:#x}"


def _function(sym):
    return sym.split("+", 1)[0]


def lab_absent_summary(stdout, guest_stext=None, system_map=None):
    """`hpslot absent --json` output as {"total", "by_slot": {slot: n},
    "by_function": {function: n}, "by_symbol": {function+off: n}}; None when
    the step printed nothing usable (Debian's QEMU, a failed call)."""
    try:
        report = json.loads(stdout) if isinstance(stdout, str) else stdout
    except ValueError:
        return None
    if not isinstance(report, dict) or "slots" not in report:
        return None
    out = {"total": 0, "by_slot": {}, "by_function": {}, "by_symbol": {}}
    for s in report["slots"]:
        n = s.get("absent_reads")
        if n is None:
            return None
        out["total"] += n
        out["by_slot"][str(s.get("slot"))] = n
        for p in s.get("absent_read_pcs") or []:
            sym = "other" if p.get("pc") == "other" else lab_ksym(p.get("pc"), guest_stext, system_map)
            out["by_symbol"][sym] = out["by_symbol"].get(sym, 0) + p.get("count", 0)
            fn = _function(sym)
            out["by_function"][fn] = out["by_function"].get(fn, 0) + p.get("count", 0)
    return out


def lab_absent_judge(report, summary):
    """An iteration's report with the absent-read count attached and, when
    any read reached a removed drive, a finding of kind absent-read that
    names the functions (expected failures match on them). No summary (the
    count could not be read on a fidelity VM) is a finding too: a zero must
    have been read, never assumed."""
    report = dict(report)
    findings = list(report.get("findings") or [])
    report["absent"] = summary
    if summary is None:
        findings.append({"kind": ABSENT_KIND, "line": "reads that reached removed drives: not counted "
                         "(hpslot absent printed no count)", "context": []})
    elif summary["total"]:
        funcs = sorted(summary["by_function"].items(), key=lambda kv: -kv[1])
        findings.append({"kind": ABSENT_KIND,
                         "line": f"{summary['total']} read(s) reached removed drives: "
                                 + ", ".join(f"{f} x{n}" for f, n in funcs),
                         "context": [f"{s}: {n}" for s, n in sorted(summary["by_symbol"].items())]})
    report["findings"] = findings
    report["ok"] = bool(report.get("ok")) and not findings
    return report


class FilterModule:
    def filters(self):
        return {"lab_ksym": lab_ksym, "lab_absent_summary": lab_absent_summary,
                "lab_absent_judge": lab_absent_judge}
