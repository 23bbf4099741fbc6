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
        return " / ".join(str(record(summary, v)["absent_reads"][timeout]["marked"][str(n)]["total"])
                          for v in ("stock", "patched"))
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
