"""bar-squeeze's filters (lab/plugins/filter/lab_bars.py): where a BAR
could go in /proc/iomem, the squeeze check that fails an iteration that
squeezed nothing, and the metrics of moved BARs."""

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "lab/plugins/filter"))
import lab_bars  # noqa: E402
sys.path.insert(0, str(REPO / "lab/plugins"))
import lab_judge  # noqa: E402

# a 1 GiB guest without a 64-bit window, after the blocker's hot-add
# (bs2-like): the only 1 GiB-aligned block, [0x40000000, 0x7fffffff],
# holds the blocker's port window
IOMEM = """00000000-00000fff : Reserved
00100000-3ffdcfff : System RAM
40000000-afffffff : PCI Bus 0000:00
  40000000-4fffffff : PCI Bus 0000:05
    40000000-4fffffff : 0000:05:00.0
      40000000-4fffffff : nvme
b0000000-bfffffff : PCI MMCONFIG 0000 [bus 00-ff]
c0000000-febfffff : PCI Bus 0000:00
  fd000000-fd1fffff : PCI Bus 0000:06
  fd200000-fd3fffff : PCI Bus 0000:05
fec00000-fec003ff : IOAPIC 0""".splitlines()
GIB = 1 << 30


def test_free_blocks_are_aligned_inside_the_host_bridge_and_clear_of_its_children():
    assert lab_bars.free_aligned_blocks(IOMEM, GIB) == []
    assert lab_bars.free_aligned_blocks(IOMEM, GIB // 2) == [
        "0x60000000-0x7fffffff", "0x80000000-0x9fffffff", "0xc0000000-0xdfffffff"]
    # without the blocker the 1 GiB block is free
    assert lab_bars.free_aligned_blocks([x for x in IOMEM if ":05" not in x and "nvme" not in x], GIB) == [
        "0x40000000-0x7fffffff"]
    # MMCONFIG and the IOAPIC are no host bridge window
    blocks = [tuple(int(x, 16) for x in b.split("-")) for b in lab_bars.free_aligned_blocks(IOMEM, 16 << 20)]
    assert blocks and all(e < 0xb0000000 or (s >= 0xc0000000 and e < 0xfec00000) for s, e in blocks)
    assert not any(s <= 0xfd3fffff and 0xfd000000 <= e for s, e in blocks), "over the ports' windows"


def test_the_new_devices_own_port_window_is_the_re_add_case():
    """bar-squeeze1, iteration 3, and every iteration after a move: the
    target port still held the 1 GiB window an earlier add had grown; that
    block is the new device's to use, so nothing had to move. Not a setup
    failure but the re-add case, named as such (kept_window); a free block
    outside the port's windows still is one."""
    lines = IOMEM[:3] + ["  40000000-7fffffff : PCI Bus 0000:06"] + IOMEM[6:]
    assert lab_bars.free_aligned_blocks(lines, GIB) == []
    assert lab_bars.free_aligned_blocks(lines, GIB, [(0x40000000, 0x7fffffff)]) == ["0x40000000-0x7fffffff"]
    rep = {"ok": True, "findings": [], "steps": {"after": {}, "before": {"iomem": lines, "slots": [
        {"slot": "6", "windows": [{"start": "0x40000000", "end": "0x7fffffff", "assigned": True},
                                  {"start": "0x0", "end": "0x0", "assigned": False}]}]}}}
    r = lab_bars.lab_bar_squeeze_judge(rep, 6, 1024)
    assert r["findings"] == [] and r["ok"], r["findings"]
    assert r["squeeze"] == {"bar_size": GIB, "free_blocks_before": [], "kept_window": ["0x40000000-0x7fffffff"]}
    # the same port without that window: a free block elsewhere is no squeeze
    r = lab_bars.lab_bar_squeeze_judge(dict(rep, steps={"after": {}, "before": {"iomem": IOMEM, "slots": []}}),
                                       6, 512)
    assert [f["kind"] for f in r["findings"]] == ["setup"]


def test_a_neighbours_pause_is_read_from_its_kernel_line():
    """Patch 0020 logs each paused driver's pause; the metrics keep it per
    moved neighbour, not for the new drive, and the blocker's reset time."""
    after = {"slots": [
        {"slot": "3", "functions": [{"dev": "0000:03:00.0", "bars": [], "log": [
            "[  99.1] nvme 0000:03:00.0: BAR 2 moved to [mem 0x80000000-0x8fffffff 64bit pref]",
            "[  99.2] nvme 0000:03:00.0: resumed after a BAR move, paused 12345 us"]}]},
        {"slot": "6", "functions": [{"dev": "0000:06:00.0", "bars": [], "log": [
            "[  99.3] nvme 0000:06:00.0: resumed after a BAR move, paused 7 us"]}]}]}
    m = lab_bars.lab_bar_squeeze_metrics([{"steps": {"before": {}, "after": after,
                                                     "reset": {"reset_ms": 40.5}}}], 6, 1024)
    assert m["iterations"][0]["paused_ms"] == {"0000:03:00.0": 12.345}
    assert m["iterations"][0]["reset_ms"] == 40.5 and m["paused_ms_max"] == 12.345


def report(iomem, ok=False):
    return {"ok": ok, "findings": [] if ok else [{"kind": "step", "line": "after failed (exit 1): bars-assigned",
                                                   "context": []}],
            "steps": {"before": {"iomem": iomem}, "after": {}}}


def test_an_iteration_that_squeezed_nothing_fails_as_setup():
    r = lab_bars.lab_bar_squeeze_judge(report(IOMEM), 6, 1024)
    assert [f["kind"] for f in r["findings"]] == ["step"] and r["squeeze"]["free_blocks_before"] == []
    # a CMB that is no power of two is rounded up, as QEMU sizes the BAR
    assert lab_bars.lab_bar_squeeze_judge(report(IOMEM), 6, 1000)["squeeze"]["bar_size"] == GIB
    r = lab_bars.lab_bar_squeeze_judge(report(IOMEM, ok=True), 6, 512)
    assert not r["ok"] and r["findings"][0]["kind"] == "setup" and "3 free block(s)" in r["findings"][0]["line"]


def bars_view(slot_bars):
    return {"slots": [{"slot": s, "windows": [], "functions": [
        {"dev": d, "driver": "nvme", "unassigned": sum(1 for b in bars if not b["assigned"]), "bars": bars}]}
        for s, (d, bars) in slot_bars.items()], "iomem": IOMEM}


def bar(index, start, size, assigned=True):
    return {"index": index, "start": start, "size": size, "assigned": assigned, "kind": "pref64"}


def test_a_bar_taken_from_under_its_bound_driver_fails_the_iteration():
    """bs4, iteration 2: the hot-add's retry released the blocker's port
    window, and with it the blocker's BAR 2, while nvme was bound to it; the
    new drive got 0x40000000. That is no pass: a bar-released finding."""
    before = bars_view({"5": ("0000:05:00.0", [bar(2, "0x40000000", 1 << 28)])})
    after = bars_view({"5": ("0000:05:00.0", [bar(2, "0x0", 1 << 28, False)]),
                       "6": ("0000:06:00.0", [bar(0, "0x80000000", 16384), bar(2, "0x40000000", GIB)])})
    rep = {"ok": True, "findings": [], "steps": {"before": before, "after": after}}
    r = lab_bars.lab_bar_squeeze_judge(rep, 6, 1024)
    (f,) = r["findings"]
    assert not r["ok"] and f["kind"] == "bar-released"
    assert f["line"] == ("slot 5: 0000:05:00.0 BAR 2 (0x10000000 bytes at 0x40000000) was released for the "
                         "hot-add while nvme was bound to it")
    # the same BAR unassigned with no driver bound is no such finding
    after["slots"][0]["functions"][0]["driver"] = None
    assert lab_bars.lab_bar_squeeze_judge(dict(rep, findings=[]), 6, 1024)["findings"] == []


def test_a_reset_that_fails_on_a_released_bar_is_part_of_that_finding():
    """bar-move1, stock, iteration 2: the controller reset after the add
    failed ("I/O error") because the add had released the blocker's BAR:
    one cause, one finding; without a released BAR the failed reset stays
    a finding of its own."""
    before = bars_view({"5": ("0000:05:00.0", [bar(2, "0x40000000", 1 << 28)])})
    after = bars_view({"5": ("0000:05:00.0", [bar(2, "0x0", 1 << 28, False)])})
    reset = {"kind": "step", "step": "reset", "line": "reset failed (exit 1)", "context": ["sh: 1: echo: echo: I/O error"]}
    rep = {"ok": False, "findings": [reset], "steps": {"before": before, "after": after}}
    r = lab_bars.lab_bar_squeeze_judge(rep, 6, 1024)
    (f,) = r["findings"]
    assert f["kind"] == "bar-released" and f["context"][-1] == "then: reset failed (exit 1): sh: 1: echo: echo: I/O error"
    r = lab_bars.lab_bar_squeeze_judge(dict(rep, steps={"before": before, "after": before}), 6, 1024)
    assert r["findings"] == [reset] and not r["ok"]


def test_metrics_name_the_bars_that_moved_and_the_new_drive():
    before = bars_view({"5": ("0000:05:00.0", [bar(2, "0x40000000", 1 << 28)])})
    after = bars_view({"5": ("0000:05:00.0", [bar(2, "0x80000000", 1 << 28)]),
                       "6": ("0000:06:00.0", [bar(0, "0xfd000000", 16384), bar(2, "0x0", GIB, False)])})
    rep = {"ok": False, "findings": [], "steps": {"before": before, "after": after}, "squeeze": {"bar_size": GIB}}
    m = lab_bars.lab_bar_squeeze_metrics([rep], 6, 1024)
    (it,) = m["iterations"]
    assert it["moved"] == [{"slot": "5", "dev": "0000:05:00.0", "bar": 2, "size": 1 << 28,
                            "before": "0x40000000", "after": "0x80000000"}]
    assert not it["assigned"] and it["bound"] and m["assigned"] == 0 and m["moved_bars"] == 1
    assert it["new_device"][0]["unassigned"] == 1 and m["iomem_first"]["before"] == IOMEM


def test_a_released_bar_is_stocks_known_failure_and_patched_fails_on_it():
    """bar-squeeze2's second iteration (6.1 released the blocker's window
    under its bound nvme): an expected failure of stock and Debian's kernel
    (fixed by patch 0017), a failure of patched, whose kernel must refuse
    the release; a setup finding beside it still fails stock."""
    import json

    import yaml
    import lab_results
    summary = json.loads((REPO / "reference-results/bar-squeeze2/summary.json").read_text())
    (rec,) = [r for r in summary["scenarios"] if r["name"] == "bar-squeeze"]
    kept = [f for f in rec["findings"] if f["kind"] in ("step", "bar-released")]
    assert [f["kind"] for f in kept] == ["step", "bar-released"]
    rec = dict(rec, findings=kept)
    lists = {v: lab_judge.load_expected(REPO / "kernel/expected-failures", v)
             for v in ("stock", "distro", "patched")}
    for variant, status in (("stock", "xfail"), ("distro", "xfail"), ("patched", "fail")):
        (r,) = lab_results.lab_apply_expected([dict(rec, variant=variant)], lists)
        assert r["status"] == status, variant
    (r,) = lab_results.lab_apply_expected([dict(rec, variant="stock", findings=rec["findings"] + [
        {"kind": "setup", "line": "no squeeze: 1 free block(s) of 0x40000000 bytes", "context": []}])], lists)
    assert r["status"] == "fail"


STUB = "0000:08:00.0"
REFUSAL = ("pcieport 0000:00:02.6: cannot make room for 0x40000000 bytes: 0000:08:00.0 (pci-stub) cannot move: "
           "its driver does not opt in")


def immovable(refusal_log, new_assigned=False, moved=False):
    """An iteration of lab_bar_squeeze_immovable: the blocker in slot 5
    bound to pci-stub (step stub), its kernel line (or none) in its log."""
    before = bars_view({"5": (STUB, [bar(2, "0x40000000", 1 << 28)])})
    after = bars_view({"5": (STUB, [bar(2, "0x80000000" if moved else "0x40000000", 1 << 28)]),
                       "6": ("0000:09:00.0", [bar(0, "0xfd000000", 16384),
                                              bar(2, "0x40000000" if new_assigned else "0x0", GIB, new_assigned)])})
    for v in (before, after):
        v["slots"][0]["functions"][0]["driver"] = "pci-stub"
    after["slots"][0]["functions"][0]["log"] = refusal_log
    return {"ok": True, "findings": [], "steps": {"stub": {"ok": True, "dev": STUB, "driver": "pci-stub"},
                                                  "before": before, "after": after}}


def test_an_immovable_neighbour_passes_only_when_0020_refuses_naming_it():
    """lab_bar_squeeze_immovable: the add must be refused with patch 0020's
    line naming the pci-stub device, the new BAR left unassigned, nothing
    moved; each way of getting it wrong is a finding."""
    r = lab_bars.lab_bar_squeeze_judge(immovable([REFUSAL]), 6, 1024, 5)
    assert r["ok"] and r["findings"] == [] and r["refused"] == REFUSAL
    assert lab_bars.lab_bar_squeeze_metrics([r], 6, 1024)["refused"] == 1
    # no line (stock: nothing tried), a line naming another device
    for log in ([], [REFUSAL.replace(STUB, "0000:07:00.0")]):
        r = lab_bars.lab_bar_squeeze_judge(immovable(log), 6, 1024, 5)
        (f,) = r["findings"]
        assert not r["ok"] and f["kind"] == "refusal"
        assert f["line"] == f"the add was not refused naming the immovable {STUB} (pci-stub)"
    r = lab_bars.lab_bar_squeeze_judge(immovable([REFUSAL], new_assigned=True), 6, 1024, 5)
    (f,) = r["findings"]
    assert f["line"] == f"the add was not refused naming the immovable {STUB} (pci-stub)"
    assert "the new drive got every BAR" in f["context"]
    r = lab_bars.lab_bar_squeeze_judge(immovable([REFUSAL], moved=True), 6, 1024, 5)
    (f,) = r["findings"]
    assert f["kind"] == "refusal-moved" and f["line"].startswith(f"slot 5: {STUB} BAR 2 moved from 0x40000000 to")
    # bar-refuse1, stock, second add: 6.1 released the neighbours' BARs
    # (to nothing) and gave the block to the new drive: released, not moved
    rep = immovable([])
    rep["steps"]["after"]["slots"][0]["functions"][0]["bars"] = [bar(2, "0x0", 1 << 28, False)]
    kinds = [f["kind"] for f in lab_bars.lab_bar_squeeze_judge(rep, 6, 1024, 5)["findings"]]
    assert kinds == ["refusal", "bar-released"]
    # without the option the same view is judged as before: no refusal asked
    assert "refused" not in lab_bars.lab_bar_squeeze_judge(immovable([]), 6, 1024)


def test_the_missing_refusal_is_stocks_known_failure_only_with_the_option():
    """stock and distro: no refusal line (they never try to move) is
    expected with lab_bar_squeeze_immovable only; patched fails on it, and
    a neighbour moved beside it fails everywhere."""
    import yaml
    import lab_results
    lists = {v: lab_judge.load_expected(REPO / "kernel/expected-failures", v)
             for v in ("stock", "distro", "patched")}
    rec = lab_bars.lab_bar_squeeze_judge(immovable([]), 6, 1024, 5)
    rec = {"name": "bar-squeeze", "status": "fail", "findings": rec["findings"]}
    on = {"lab_bar_squeeze_immovable": True}
    for variant, profile, status in (("stock", on, "xfail"), ("distro", on, "xfail"), ("patched", on, "fail"),
                                     ("stock", {}, "fail")):
        (r,) = lab_results.lab_apply_expected([dict(rec, variant=variant)], lists, profile)
        assert r["status"] == status, (variant, profile)
    bad = lab_bars.lab_bar_squeeze_judge(immovable([], moved=True), 6, 1024, 5)["findings"]
    (r,) = lab_results.lab_apply_expected([dict(rec, variant="stock", findings=bad)], lists, on)
    assert r["status"] == "fail"


def test_labprobe_bars_refuses_an_expected_slot_it_does_not_look_at(labprobe):
    from conftest import run
    for opt in ("--expect-present", "--expect-bound"):
        r = run([labprobe, "bars", "--slots", "1,2", opt, "3"], timeout=30)
        assert r.returncode == 2 and f"labprobe bars: {opt} 3 is not one of --slots" in r.stderr


def test_bar_squeeze_ab2_stock_releases_a_bound_window_and_patched_refuses():
    """Run bar-squeeze-ab2 (profiles/bar-squeeze-ab.yml, two adds each):
    both kernels fail to place the 1 GiB BAR (expected: nothing moves BARs
    yet); on the second add stock released the blocker's window with nvme
    bound to its BAR and gave 0x40000000 to the new drive (bar-released,
    stock's expected failure), patched (0017) said the window was in use
    and kept it."""
    import json
    ref = REPO / "reference-results/bar-squeeze-ab2"
    summary = json.loads((ref / "summary.json").read_text())
    recs = {r["variant"]: r for r in summary["scenarios"] if r["name"] == "bar-squeeze"}
    assert {v: r["status"] for v, r in recs.items()} == {"stock": "xfail", "patched": "xfail"}
    assert [f["kind"] for f in recs["stock"]["findings"]] == ["step", "bar-released"]
    assert [f["kind"] for f in recs["patched"]["findings"]] == ["step", "step"]
    second = {v: r["metrics"]["iterations"][1] for v, r in recs.items()}
    assert [m["before"] for m in second["stock"]["moved"]] == ["0x40000000"]
    assert second["patched"]["moved"] == []
    new_bar2 = {v: {b["index"]: b for b in it["new_device"][0]["bars"]}[2] for v, it in second.items()}
    assert new_bar2["stock"]["start"] == "0x40000000" and not new_bar2["patched"]["assigned"]
    stock_log = (ref / "kernel-log-stock.txt").read_text()
    patched_log = (ref / "kernel-log-patched.txt").read_text()
    assert "resource 9 [mem 0x40000000-0x4fffffff 64bit pref] released" in stock_log
    assert ("resource 9 [mem 0x40000000-0x4fffffff 64bit pref] not released: 0000:06:00.0 BAR 2 "
            "[mem 0x40000000-0x4fffffff 64bit pref] is in use") in patched_log
    assert "0x4fffffff 64bit pref] released" not in patched_log


def test_bar_move3_stock_fails_to_place_and_patched_moves_four_neighbours():
    """Run bar-move3 (profiles/bar-squeeze-ab.yml: four neighbours with a
    256 MiB CMB fill the only 1 GiB block, two adds each): stock cannot
    place the new BAR, then releases all four bound windows (xfail);
    patched (0018-0020) moves the four windows and BARs with nvme paused,
    places the BAR and binds nvme, fio goes on, and the re-add fits the
    window it kept (pass)."""
    import json
    ref = REPO / "reference-results/bar-move3"
    summary = json.loads((ref / "summary.json").read_text())
    recs = {r["variant"]: r for r in summary["scenarios"] if r["name"] == "bar-squeeze"}
    assert {v: r["status"] for v, r in recs.items()} == {"stock": "xfail", "patched": "pass"}
    assert [f["kind"] for f in recs["stock"]["findings"]] == ["step"] + ["bar-released"] * 4
    first, second = recs["patched"]["metrics"]["iterations"]
    assert first["assigned"] and first["bound"] and not first["squeeze"]["free_blocks_before"]
    moved = {m["dev"]: (m["before"], m["after"]) for m in first["moved"]}
    assert len(moved) == 4 and all(a != "0x0" and a != b for b, a in moved.values())
    assert set(first["paused_ms"]) == set(moved) and all(p > 0 for p in first["paused_ms"].values())
    assert first["reset_ms"] > 0
    assert second["moved"] == [] and second["squeeze"]["kept_window"] == ["0x40000000-0x7fffffff"]
    log = (ref / "kernel-log-move-patched.txt").read_text()
    assert "made room at [0x40000000-0x7fffffff]: 4 window(s) and 4 device(s) moved" in log
    assert log.count("resumed after a BAR move, paused") == 4


def test_the_bar_move3_table_in_the_docs_matches_its_result_file():
    """docs/measurements.md's table of the moved neighbours is recomputed
    from reference-results/bar-move3/summary.json."""
    import json
    import re
    text = (REPO / "docs/measurements.md").read_text()
    section = text[text.index("four neighbours moved (bar-move3)"):]
    rows = re.findall(r"^\| (\S+) \(slot (\d+)\) \| (0x[0-9a-f]+) \| (0x[0-9a-f]+) \| ([0-9.]+) \|$", section, re.M)
    summary = json.loads((REPO / "reference-results/bar-move3/summary.json").read_text())
    (rec,) = [r for r in summary["scenarios"] if r["name"] == "bar-squeeze" and r["variant"] == "patched"]
    first = rec["metrics"]["iterations"][0]
    want = {(m["dev"], m["slot"], m["before"], m["after"], f"{first['paused_ms'][m['dev']]:.1f}")
            for m in first["moved"]}
    assert len(rows) == 4 and set(rows) == want
    assert f"took {first['reset_ms']:.1f} ms" in section


def test_bar_knobs1_the_knobs_give_the_block_to_the_first_port_added():
    """Run bar-knobs1 (stock, pci=realloc,hpmmioprefsize=1G): the boot
    keeps the firmware's 2 MiB pref windows; the first blocker's port gets
    the 1 GiB block at its re-add; the squeezed drive still fails, then
    takes the four neighbours' windows (xfail)."""
    import json
    ref = REPO / "reference-results/bar-knobs1"
    summary = json.loads((ref / "summary.json").read_text())
    (rec,) = [r for r in summary["scenarios"] if r["name"] == "bar-squeeze"]
    assert rec["status"] == "xfail" and [f["kind"] for f in rec["findings"]] == ["step"] + ["bar-released"] * 4
    first = rec["metrics"]["iterations"][0]
    prefs = {s: [w for w in ws if w["kind"] == "pref64"] for s, ws in first["windows_before"].items()}
    assert [w["size"] for w in prefs["4"]] == [1 << 30] and prefs["4"][0]["start"] == "0x40000000"
    assert not first["assigned"]
    log = (ref / "kernel-log.txt").read_text()
    assert "pci=realloc,hpmmioprefsize=1G" in log
    assert "bridge window [mem 0x40000000-0x7fffffff 64bit pref]: assigned" in log


def test_bar_refuse2_patched_refuses_naming_the_pci_stub_neighbour_and_the_docs_table_matches():
    """Run bar-refuse2 (profiles/bar-squeeze-ab.yml with
    lab_bar_squeeze_immovable): patched refuses both adds with 0020's line
    naming the pci-stub neighbour, moves and releases nothing (pass);
    stock never tries and releases four windows on the second add
    (xfail); docs/measurements.md's table is these numbers."""
    import json
    import re
    summary = json.loads((REPO / "reference-results/bar-refuse2/summary.json").read_text())
    assert summary["profile"]["lab_bar_squeeze_immovable"] is True
    recs = {r["variant"]: r for r in summary["scenarios"] if r["name"] == "bar-squeeze"}
    rows = {}
    for variant, rec in recs.items():
        m = rec["metrics"]
        its = m["iterations"]
        stub = {it["immovable"] for it in its}
        assert len(stub) == 1 and None not in stub
        (dev,) = stub
        refused = [it for it in its if it["refused"] and f"{dev} (pci-stub) cannot move" in it["refused"]]
        moved = sum(1 for it in its for x in it["moved"] if x["after"] not in ("0x0", "0x00000000"))
        rows[variant] = (f"{len(refused)} of {len(its)}", str(moved), str(m["released_bars"]),
                         f"{m['assigned']} of {len(its)}", rec["status"])
    assert rows["patched"] == ("2 of 2", "0", "0", "0 of 2", "pass")
    assert rows["stock"][0] == "0 of 2" and rows["stock"][4] == "xfail"
    assert {f["kind"] for f in recs["stock"]["findings"]} == {"refusal", "bar-released"}
    doc = (REPO / "docs/measurements.md").read_text()
    for variant, row in rows.items():
        assert re.search(rf"^\| {variant} \| " + r" \| ".join(map(re.escape, row)) + r" \|$", doc, re.M), (variant, row)
    log = (REPO / "reference-results/bar-refuse2/kernel-log-refuse-patched.txt").read_text()
    assert log.count(f"cannot make room for 0x40000000 bytes: {dev} (pci-stub) cannot move") == 2
