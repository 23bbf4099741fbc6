"""Filters between the guest probe, the scenarios and the results files."""

import json

from ansible.errors import AnsibleFilterError


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
    return report


def lab_junit(summary):
    """JUnit XML of a summary: one testsuite, one testcase a (scenario, VM)."""
    from xml.sax.saxutils import escape, quoteattr

    scenarios = summary.get("scenarios", [])
    failures = sum(1 for s in scenarios if s["status"] == "fail")
    skipped = sum(1 for s in scenarios if s["status"] == "skip")
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
        elif s["status"] == "skip":
            lines.append("    <skipped/>")
        lines.append(f'    <system-out>{escape(json.dumps(s.get("metrics", {})))}</system-out>')
        lines.append("  </testcase>")
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"


def lab_scenario_seconds(name, records):
    """Wall time of a scenario over all VMs (they run in parallel: the longest)."""
    times = [r.get("seconds", 0) for r in records if r.get("name") == name]
    return max(times) if times else 0


def lab_format_phase(item):
    return f"{item['key']:<28} {float(item['value']):9.2f}"


class FilterModule:
    def filters(self):
        return {
            "lab_probe_drive_args": lab_probe_drive_args,
            "lab_probe_report": lab_probe_report,
            "lab_junit": lab_junit,
            "lab_scenario_seconds": lab_scenario_seconds,
            "lab_format_phase": lab_format_phase,
        }
