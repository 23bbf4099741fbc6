"""lab-report: the plots it draws from a real run's summary, and the reason
it gives for a plot it cannot draw."""
import json
import shutil
import subprocess

from conftest import REPO

REPORT = REPO / "lab/tools/lab-report"


def report(tmp_path, summary):
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    subprocess.run(["/usr/bin/python3", str(REPORT), str(tmp_path)], check=True, capture_output=True)
    return (tmp_path / "report.html").read_text()


def test_breakdown_plot_of_a_lightning_run(tmp_path):
    # lightning-ab3: disconnect-flag on stock and patched, 3 timeouts
    shutil.copy(REPO / "reference-results/lightning-ab3/summary.json", tmp_path)
    page = report(tmp_path, json.loads((tmp_path / "summary.json").read_text()))
    assert (tmp_path / "plots/breakdown.svg").stat().st_size > 1000
    assert 'src="plots/breakdown.svg"' in page


def test_no_breakdown_without_disconnect_flag(tmp_path):
    ab3 = json.loads((REPO / "reference-results/lightning-ab3/summary.json").read_text())
    ab3["scenarios"] = [r for r in ab3["scenarios"] if r["name"] != "disconnect-flag"]
    page = report(tmp_path, ab3)
    assert not (tmp_path / "plots/breakdown.svg").exists()
    assert "not drawn, no disconnect-flag breakdown in this run" in page


def test_lightning_goals_in_the_report(tmp_path):
    """A run with its lightning goals (lab_lightning.py) shows the table and
    each goal, a missed one as not met; a run without them has no section."""
    import sys
    sys.path.insert(0, str(REPO / "lab/plugins/filter"))
    import lab_lightning
    ab6 = json.loads((REPO / "reference-results/lightning-ab6/summary.json").read_text())
    ab6["lightning"] = lab_lightning.lab_lightning_goals(ab6["scenarios"])
    page = report(tmp_path, ab6)
    assert "Lightning: 32 drives yanked at once" in page and "<td>402.267</td>" in page
    assert page.count('<span class="fail">not met</span>') == 1 and page.count('<span class="pass">met</span>') == 3
    del ab6["lightning"]
    assert "Lightning:" not in report(tmp_path, ab6)
