"""bar-squeeze's metrics (issue 23, moving BARs) from its iteration
reports: labprobe bars before and after the hot-add of a drive whose BAR
does not fit, per slot."""

import re


def _functions(bars_report):
    """{slot: {dev: {bar index: (start, size, assigned)}}} of one labprobe
    bars report, and {slot: windows}"""
    funcs, windows = {}, {}
    for s in (bars_report or {}).get("slots") or []:
        slot = str(s.get("slot"))
        windows[slot] = s.get("windows") or []
        funcs[slot] = {f["dev"]: {b["index"]: (b["start"], b["size"], b["assigned"]) for b in f.get("bars", [])}
                       for f in s.get("functions") or []}
    return funcs, windows


def _slot(view, slot):
    """The entry of slot `slot` in a labprobe bars view, {} if none."""
    return next((s for s in (view or {}).get("slots") or [] if str(s.get("slot")) == str(slot)), {})


def _moved(before, after, skip):
    """Every neighbour BAR that is at another address after (one that went
    to nothing was released, not moved: _released; records before
    bar-refuse2 counted those too)."""
    out = []
    for slot, devs in before.items():
        if slot == skip:
            continue
        for dev, bars in devs.items():
            for index, (start, size, _) in bars.items():
                now = ((after.get(slot) or {}).get(dev) or {}).get(index)
                if now and now[2] and now[0] != start:
                    out.append({"slot": slot, "dev": dev, "bar": index, "size": size, "before": start,
                                "after": now[0]})
    return out


# a neighbour's driver paused for a BAR move (kernel patch 0020's line)
PAUSED = re.compile(r"resumed after a BAR move, paused ([0-9]+) us")


def _pauses(bars_report, skip):
    """{dev: ms} of every function but the new drive's whose kernel lines
    in that view say its driver was paused for a BAR move."""
    out = {}
    for s in (bars_report or {}).get("slots") or []:
        if str(s.get("slot")) == skip:
            continue
        for f in s.get("functions") or []:
            for line in f.get("log") or []:
                m = PAUSED.search(line)
                if m:
                    out[f["dev"]] = round(int(m.group(1)) / 1000, 3)
    return out


def lab_bar_squeeze_metrics(reports, slot, cmb_mib):
    """Per iteration: the new drive (its BARs, driver, kernel lines), the
    neighbours' BARs that moved and how long each one's driver was paused
    for it (ms, from the kernel's line), the port windows before and
    after, the free blocks the new BAR had before the add, the time a
    reset of the blocker's controller took in the same VM (ms); the first
    iteration's /proc/iomem before and after."""
    slot = str(slot)
    its = []
    iomem = {}
    for i, rep in enumerate(reports):
        steps = rep.get("steps") or {}
        before, after = steps.get("before") or {}, steps.get("after") or {}
        fb, wb = _functions(before)
        fa, wa = _functions(after)
        funcs = _slot(after, slot).get("functions") or []
        its.append({
            "new_device": [{"dev": f.get("dev"), "driver": f.get("driver"), "bars": f.get("bars"),
                            "unassigned": f.get("unassigned"), "log": f.get("log")} for f in funcs],
            "assigned": bool(funcs) and all(f.get("unassigned") == 0 for f in funcs),
            "bound": bool(funcs) and all(f.get("driver") for f in funcs),
            "moved": _moved(fb, fa, slot),
            "paused_ms": _pauses(after, slot),
            "reset_ms": (steps.get("reset") or {}).get("reset_ms"),
            "windows_before": wb, "windows_after": wa,
            "squeeze": rep.get("squeeze"), "released": rep.get("released"),
            "immovable": (steps.get("stub") or {}).get("dev"), "refused": rep.get("refused"),
        })
        if i == 0:
            iomem = {"before": before.get("iomem"), "after": after.get("iomem")}
    return {"slot": int(slot), "cmb_mib": int(cmb_mib), "iterations": its,
            "assigned": sum(1 for x in its if x["assigned"]), "bound": sum(1 for x in its if x["bound"]),
            "moved_bars": sum(len(x["moved"]) for x in its),
            "paused_ms_max": max([v for x in its for v in x["paused_ms"].values()], default=None),
            "released_bars": sum(len(x["released"] or []) for x in its),
            "refused": sum(1 for x in its if x["refused"]), "iomem_first": iomem}


def _iomem(lines):
    """[(start, end, depth, name)] of /proc/iomem lines"""
    out = []
    for line in lines or []:
        depth = (len(line) - len(line.lstrip(" "))) // 2
        span, _, name = line.strip().partition(" : ")
        a, _, b = span.partition("-")
        try:
            out.append((int(a, 16), int(b, 16), depth, name))
        except ValueError:
            continue
    return out


def free_aligned_blocks(iomem_lines, size, own=()):
    """Blocks of `size` bytes, aligned to `size` (a BAR's), that lie in the
    host bridge's windows (top-level "PCI Bus 0000:00") and overlap none of
    their children but the (start, end) ranges in own (the new device's
    port's windows, which are its to use): where a BAR of that size could go
    without moving another device's."""
    return _free_blocks(_iomem(iomem_lines), size, own)


def _free_blocks(res, size, own=()):
    """free_aligned_blocks() on /proc/iomem already parsed (_iomem)"""
    free = []
    for i, (start, end, depth, name) in enumerate(res):
        if depth != 0 or name != "PCI Bus 0000:00":
            continue
        kids = []
        for s, e, d, _ in res[i + 1:]:
            if d == 0:
                break
            if d == 1 and (s, e) not in own:
                kids.append((s, e))
        at = (start + size - 1) // size * size
        while at + size - 1 <= end:
            if not any(s <= at + size - 1 and at <= e for s, e in kids):
                free.append(f"{at:#x}-{at + size - 1:#x}")
            at += size
    return free


def _released(before, after, skip):
    """Neighbour BARs assigned before the add and unassigned after it while
    their function still has its driver: taken from under a bound driver."""
    out = []
    funcs_before = _functions(before)[0]
    for s in (after or {}).get("slots") or []:
        slot = str(s.get("slot"))
        if slot == skip:
            continue
        was = funcs_before.get(slot) or {}
        for f in s.get("functions") or []:
            for b in f.get("bars") or []:
                old = (was.get(f["dev"]) or {}).get(b["index"])
                if old and old[2] and not b["assigned"] and f.get("driver"):
                    out.append({"slot": slot, "dev": f["dev"], "bar": b["index"], "size": b["size"],
                                "before": old[0], "driver": f["driver"]})
    return out


# patch 0020's refusal of a range that holds a device it cannot pause:
# "cannot make room for 0x40000000 bytes: 0000:0b:00.0 (pci-stub) cannot
# move: its driver does not opt in"
REFUSED = "cannot make room for {size:#x} bytes: {dev} (pci-stub) cannot move: its driver does not opt in"


def _refusal(report, slot, size):
    """The immovable case (lab_bar_squeeze_immovable): the blocker bound
    to pci-stub (step stub) holds part of the only block the new BAR fits,
    so a kernel that moves BARs must refuse the add with a line naming it,
    leave the new BAR unassigned and move nothing. (refusal line or None,
    findings)"""
    steps = report.get("steps") or {}
    dev = (steps.get("stub") or {}).get("dev")
    after = steps.get("after") or {}
    if not dev or not after:
        return None, []
    want = REFUSED.format(size=size, dev=dev)
    logs = [line for s in after.get("slots") or [] for f in s.get("functions") or [] for line in f.get("log") or []]
    line = next((x for x in logs if want in x), None)
    funcs = _slot(after, slot).get("functions") or []
    assigned = bool(funcs) and all(f.get("unassigned") == 0 for f in funcs)
    moved = _moved(_functions(steps.get("before"))[0], _functions(after)[0], str(slot))
    out = []
    if not line or assigned:
        out.append({"kind": "refusal", "line": f"the add was not refused naming the immovable {dev} (pci-stub)",
                    "context": [f"wanted: {want}"] + (["the new drive got every BAR"] if assigned else [])
                    + [x for f in funcs for x in f.get("log") or []][-20:]})
    for m in moved:
        out.append({"kind": "refusal-moved",
                    "line": f"slot {m['slot']}: {m['dev']} BAR {m['bar']} moved from {m['before']} to {m['after']} "
                            f"although the add needed the immovable {dev}",
                    "context": [line] if line else []})
    return line, out


def lab_bar_squeeze_judge(report, slot, cmb_mib, stub_slot=0):
    """bar-squeeze's own checks of an iteration (a steps report):
    - the squeeze was set up: before the add no free block of the new BAR's
      size and alignment (the CMB rounded up to a power of two) was left in
      the host bridge's windows; else the add proves nothing about moving
      BARs (finding: setup). A block inside the new device's port's own
      windows is no setup failure but the re-add case: a window an earlier
      add grew (or made room for) stays with its port after its device is
      removed, so the device fits again without a move (squeeze.kept_window;
      bar-squeeze1's third iteration, and every iteration after the first
      on a kernel that moves BARs);
    - no neighbour lost a BAR under its bound driver: a window released to
      make room for the new device takes the BARs below it along, and the
      driver keeps using addresses its device no longer decodes (finding:
      bar-released; bs4 saw 6.1 do it on the second hot-add);
    - with a blocker bound to pci-stub (stub_slot, lab_bar_squeeze_immovable):
      the add refused with 0020's line naming that blocker, the new BAR
      unassigned (finding: refusal) and no neighbour's BAR moved (finding:
      refusal-moved)."""
    size = 1 << (max(int(cmb_mib), 1) * 2**20 - 1).bit_length()
    steps = report.get("steps") or {}
    before, after = steps.get("before") or {}, steps.get("after") or {}
    if not before.get("iomem"):
        return report
    own = [(int(w["start"], 16), int(w["end"], 16)) for w in _slot(before, slot).get("windows") or []
           if w.get("assigned")]
    tree = _iomem(before["iomem"])
    free = _free_blocks(tree, size)
    kept = [b for b in _free_blocks(tree, size, own) if b not in free]
    released = _released(before, after, str(slot))
    report = dict(report, squeeze={"bar_size": size, "free_blocks_before": free, "kept_window": kept},
                  released=released)
    extra = []
    if int(stub_slot or 0):
        refused, extra = _refusal(report, slot, size)
        report["refused"] = refused
    if free:
        extra.append({"kind": "setup", "line": f"no squeeze: {len(free)} free block(s) of {size:#x} bytes were left "
                                               f"for the new BAR before the add ({', '.join(free[:4])})",
                      "context": []})
    findings = report["findings"]
    if released:
        # the controller reset after the add (step reset) writes to the
        # released BAR's controller: its failure is this finding's
        # consequence, kept in its context rather than counted apart
        reset = [f for f in findings if f.get("kind") == "step" and f.get("step") == "reset"
                 and "not run" not in f.get("line", "")]
        findings = [f for f in findings if f not in reset]
    for i, r in enumerate(released):
        extra.append({"kind": "bar-released",
                      "line": f"slot {r['slot']}: {r['dev']} BAR {r['bar']} ({r['size']:#x} bytes at {r['before']}) "
                              f"was released for the hot-add while {r['driver']} was bound to it",
                      "context": [x for x in (after.get("iomem") or []) if r["dev"] in x or "PCI Bus" in x][:20]
                      + ([f"then: {f['line']}: {'; '.join(f.get('context') or [])}" for f in reset] if i == 0 else [])})
    if extra:
        report["ok"] = False
        report["findings"] = findings + extra
    return report


class FilterModule:
    def filters(self):
        return {"lab_bar_squeeze_metrics": lab_bar_squeeze_metrics,
                "lab_bar_squeeze_judge": lab_bar_squeeze_judge}
