"""The measured Lightning tables (README.md and docs/*.md) match the
committed result files they name: each table's numbers are recomputed from the last
reference-results/<run>/summary.json its section names before the table
(scenario disconnect-flag, devices marked disconnected). A number typed by
hand, or a result file replaced without the README, fails here."""
import json
import re

import pytest

from conftest import REPO

HEADER = "| completion timeout |"
REF = re.compile(r"reference-results/([A-Za-z0-9_.-]+)/summary\.json")


def tables():
    """(section title, run, header cells, rows of cells) of every Lightning table."""
    text = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    out = []
    for section in re.split(r"\n(?=#{1,3} )", text):
        lines = section.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith(HEADER):
                continue
            runs = REF.findall("\n".join(lines[:i]))
            assert runs, f"README section '{lines[0]}': a measured table names no reference-results file"
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip("|").split("|")])
            out.append((lines[0], runs[-1], [c.strip() for c in line.strip("|").split("|")], rows))
    return out


def record(summary, variant):
    (rec,) = [r for r in summary["scenarios"] if r["name"] == "disconnect-flag" and r["variant"] == variant]
    return rec["metrics"]


def expected(summary, column, timeout):
    """The README cell of column at timeout (us, as a string), from the summary."""
    m = re.fullmatch(r"(stock|patched) T\((\d+)\) ms", column)
    if m:
        t = record(summary, m[1])["T_ms"][timeout]["marked"][m[2]]
        return str(round(t)) if t is not None else "n/a"
    if column == "reads of removed drives, stock / patched" or re.fullmatch(
            r"reads of removed drives in the \d+ yanks, stock / patched", column):
        n = max(int(k) for k in record(summary, "patched")["absent_reads"][timeout]["marked"])
        # a yank without a count leaves the size's total unknown: n/a, never 0
        return " / ".join(str((record(summary, v)["absent_reads"][timeout]["marked"][str(n)] or {}).get("total", "n/a"))
                          for v in ("stock", "patched"))
    if column == "patched T over its floor":
        n = max(record(summary, "patched")["T_over_floor"][timeout]["marked"], key=int)
        v = record(summary, "patched")["T_over_floor"][timeout]["marked"][n]
        return f"{v:.2f}" if v is not None else "n/a"
    m = re.fullmatch(r"(stock|patched) vCPUs busy %", column)
    if m:
        mets = record(summary, m[1])
        n = max(mets["breakdown"][timeout]["marked"], key=int)
        return str(round(mets["breakdown"][timeout]["marked"][n]["cpu_window"]["busy_pct"]))
    pytest.fail(f"README table column '{column}' has no rule in tests/test_readme_numbers.py")


def test_there_are_tables_to_check():
    assert len(tables()) >= 2


@pytest.mark.parametrize("title, run, header, rows", tables(), ids=lambda v: v if isinstance(v, str) else "")
def test_table_matches_its_result_file(title, run, header, rows):
    summary = json.loads((REPO / "reference-results" / run / "summary.json").read_text())
    assert rows, title
    for row in rows:
        timeout = str(int(float(row[0].split()[0]) * 1000))
        for column, cell in zip(header[1:], row[1:]):
            assert cell == expected(summary, column, timeout), (title, run, row[0], column)


DPC_HEADER = "| dpc-surprise-down, 4 drives |"


def dpc_cell(summary, row, variant):
    (rec,) = [r for r in summary["scenarios"] if r["name"] == "dpc-surprise-down" and r["variant"] == variant]
    m = rec["metrics"]
    if row == "containments the DPC driver took through error recovery":
        return f"{m['dpc_kprobe_hits']['dpc_process_error']} of {m['dpc_kprobe_hits']['dpc_handler']}"
    if row == "pciehp handled the yank, median ms after its interrupt":
        return str(round(m["handled_ms"]["p50"]))
    if row == "last drive gone, ms after the first interrupt":
        return str(round(m["last_gone_ms"]["max"]))
    pytest.fail(f"DPC table row '{row}' has no rule in tests/test_readme_numbers.py")


def test_dpc_tables_match_their_result_file():
    text = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    found = 0
    for section in re.split(r"\n(?=#{1,3} )", text):
        lines = section.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith(DPC_HEADER):
                continue
            runs = REF.findall("\n".join(lines[:i]))
            assert runs, f"section '{lines[0]}': a measured DPC table names no reference-results file"
            summary = json.loads((REPO / "reference-results" / runs[-1] / "summary.json").read_text())
            variants = [c.strip() for c in line.strip("|").split("|")][1:]
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip("|").split("|")]
                for variant, cell in zip(variants, cells[1:]):
                    assert cell == dpc_cell(summary, cells[0], variant), (lines[0], cells[0], variant)
                found += 1
    assert found >= 3


def test_the_edit_loop_table_matches_its_result_files():
    """docs/measurements.md's edit-loop table: each row's phases from
    reference-results/edit-loop1/<path>/summary.json and its wall time from
    times.txt."""
    text = (REPO / "docs/measurements.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `lab_kernel_tree`")]
    assert len(rows) == 2, rows
    times = (REPO / "reference-results/edit-loop1/times.txt").read_text()
    for row, path, run in zip(rows, ("tree", "quick"), ("edit-loop2", "edit-loop4")):
        cells = [c.strip() for c in row.strip("|").split("|")]
        phases = json.loads((REPO / f"reference-results/edit-loop1/{path}/summary.json").read_text())["phases"]
        want = [phases[p] for p in ("kernel", "image", "define", "boot", "scenario:bulk-surprise-removal")]
        assert [float(c) for c in cells[2:]] == [round(x, 1) for x in want], (path, cells)
        (wall,) = re.findall(rf"\({run}[^)]*\): ([0-9.]+) s wall", times)
        assert float(cells[1]) == round(float(wall), 1), (path, cells[1], wall)


FLAG_HEADER = "| patched, completion timeout |"


def test_the_disconnected_flag_table_matches_its_result_file():
    """docs/measurements.md's marked-against-unmarked table (patch 0008's
    switch) is recomputed from the reference-results file its section
    names; the hotplug event tracepoint (0001) fired once a yanked drive on
    patched and never on stock."""
    text = (REPO / "docs/measurements.md").read_text()
    (section,) = [s for s in re.split(r"\n(?=#{1,3} )", text) if FLAG_HEADER in s]
    lines = section.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(FLAG_HEADER))
    run = REF.findall("\n".join(lines[:i]))[-1]
    summary = json.loads((REPO / "reference-results" / run / "summary.json").read_text())
    m = record(summary, "patched")
    rows = [[c.strip() for c in row.strip("|").split("|")] for row in lines[i + 2:] if row.startswith("|")]
    assert len(rows) == 2
    for cells in rows:
        t = str(int(float(cells[0].split()[0]) * 1000))
        n = max(m["T_ms"][t]["marked"], key=int)
        reads = m["absent_reads"][t]
        assert cells[1:] == [str(round(m["T_ms"][t]["marked"][n])), str(round(m["T_ms"][t]["unmarked"][n])),
                             f"{m['unmarked_over_marked'][t][n]:.2f}",
                             f"{reads['marked'][n]['total']} / {reads['unmarked'][n]['total']}"], cells
    for t, flags in m["phases"].items():
        for flag, sizes in flags.items():
            for n, ph in sizes.items():
                assert ph["tracepoint_ms"]["hp_event"]["n"] == int(n), (t, flag, n)
    stock = record(summary, "stock")
    assert not any("hp_event" in (ph.get("tracepoint_ms") or {}) for flags in stock["phases"].values()
                   for sizes in flags.values() for ph in sizes.values())
