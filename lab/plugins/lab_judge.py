"""The lab's one judge: every record's status is computed here, and only here.

A scenario declares what it expects (playbooks/tasks/scenario-result.yml's
`scenario_expect`) and which steps an iteration has (lab_steps_report: each
step's probe output, labprobe's or hpslot's JSON, its failed checks and
findings); the filters that compare QEMU's view with the guest's and the
like only add findings. The judge turns those into a status:

- `pass`: the record has every piece of data its declaration asks for and
  no finding;
- `skip`: the scenario declared why it could not run here (`skip`), and no
  finding (a skipped scenario whose kernel-log window was not clean fails);
- `fail`: any finding, of the checks or of the judge itself: `no-data` (a
  report, a metric or a list the declaration promised is missing or
  measured on fewer drives than the profile put there), `measurement` (a
  value that cannot be true: before the event it is measured from, a
  count above what the profile put there), `unexplained-failure` (a
  report that failed and said not why);
- `xfail`: a failed record whose every finding is a known failure of its
  kernel variant (kernel/expected-failures/<variant>.yml).

Whoever adds findings to a record later (the kernel-log window, the
rescan loop, the results phase) calls add_findings(), which asks the judge
again; nothing else writes a status. The run fails when any record fails,
and when it has no record at all (run_status).

A declaration (all keys optional):
    iterations: N          the iterations the profile asked for
    reports: M             the reports they make (exactly M; default N: one
                           an iteration); the record's iterations and
                           failures count iterations, not reports
    measured: {PATH: N}    a metric that must hold at least N measured values:
                           a list counts its numbers, a {p50, max, n} its n,
                           a number or string counts 1; PATH is dotted
    nonempty: [PATH]       a list the profile promised entries in
    at_least: {PATH: N}    a count (a number, or a list's entries) below N is
                           missing data: what the profile put there
    at_most: {PATH: N}     a count that cannot exceed N (what the profile put
                           there)
    after_event: [PATH]    milliseconds after the event they are measured
                           from: a negative one cannot be true
Metrics producers flag what only they can tell is impossible in a list
`impossible` ([{what, value, why, ...}], at any depth of the metrics):
each is a `measurement` finding too, and the producer keeps the value out
of its data (and so out of the plots).
"""

import json
import os
import re

import yaml
from lab_common import json_object

# kinds the judge itself gives (docs/results.md)
NO_DATA = "no-data"
MEASUREMENT = "measurement"
UNEXPLAINED = "unexplained-failure"


class JudgeError(ValueError):
    """A declaration or expected-failure list the judge cannot use: a bug
    of the lab, never a verdict."""


def _finding(kind, line, context=None):
    return {"kind": kind, "line": line, "context": list(context or [])}


def resolve(metrics, path):
    """metrics at a dotted PATH; None where any part is missing."""
    value = metrics
    for part in str(path).split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _tail(text, n=20):
    return [line for line in str(text or "").strip().splitlines() if line][-n:]


# ---- an iteration's report from its steps ------------------------------------
# A step is a registered result of a probe (labprobe's or hpslot's JSON): the
# iteration names its steps, and these make its report ({ok, findings,
# steps}): the checks a step failed and the findings it reported are the
# iteration's findings.

def lab_step(result, name):
    """One step's registered result as a report: name, rc, ok, its JSON."""
    if result is None or result.get("skipped"):
        return {"name": name, "ran": False, "ok": False, "rc": None, "report": None, "stderr": []}
    rc = result.get("rc")
    return {"name": name, "ran": True, "ok": rc == 0, "rc": rc, "report": json_object(result.get("stdout", "")),
            "stderr": _tail(result.get("stderr", ""), 10), "stdout_tail": _tail(result.get("stdout", ""), 3)}


def _step_finding(step, kind="step"):
    """A failed step as a finding: its failed checks, else its error/stderr."""
    rep = step.get("report") or {}
    lines = [f"{c['name']}: {c['detail']}" for c in rep.get("checks", []) if not c.get("ok")]
    errors = [rep["error"]] if rep.get("error") else []
    errors += rep.get("errors", [])
    if not step.get("ran"):
        return {"kind": kind, "step": step["name"], "line": f"{step['name']}: not run (an earlier step failed)",
                "context": []}
    context = (lines + errors or step.get("stderr") or step.get("stdout_tail") or [])[:40]
    log = rep.get("log") or []
    if log:
        context = context + ["kernel log since the scenario's start (tail):"] + log[-40:]
    # the failed checks' names in the line: expected failures match on it
    names = ", ".join(c["name"] for c in rep.get("checks", []) if not c.get("ok"))
    return {"kind": kind, "step": step["name"],
            "line": f"{step['name']} failed (exit {step.get('rc')})" + (f": {names}" if names else ""),
            "context": context}


def lab_steps_report(results, names):
    """An iteration from its steps (None/skipped allowed for steps that need
    not run: pass them as {'skipped': True, 'optional': True}); ok when
    every step that ran exited 0; failed steps become findings (a step not
    run after a failed one too), and so do the kernel log findings labprobe
    reported and a slot hpslot's yank left behind (leftover)."""
    steps, findings, ok = {}, [], True
    for name, r in zip(names, results):
        if r is not None and r.get("optional") and r.get("skipped"):
            steps[name] = None
            continue
        st = lab_step(r, name)
        steps[name] = st["report"]
        if not st["ok"]:
            ok = False
            findings.append(_step_finding(st))
        findings += (st["report"] or {}).get("findings", [])
        findings += _leftover_findings(name, st["report"])
    return {"ok": ok and not findings, "steps": steps, "findings": findings}


def _leftover_findings(name, report):
    """hpslot remove: a device the yank did not remove (QEMU kept it and
    hpslot deleted it with device_del) was not surprise-removed."""
    return [{"kind": "leftover", "line": f"{name}: slot {slot.get('slot')}: the yank left "
             f"its device in QEMU ({slot['leftover']}): not a surprise removal",
             "context": [json.dumps(slot, sort_keys=True)[:1000]]}
            for slot in (report or {}).get("slots") or []
            if isinstance(slot, dict) and slot.get("leftover") not in (None, "none")]


def lab_layout_and_steps(layout, results, names):
    """An iteration that began with slot-layout-restore.yml: its steps'
    report, failed also when the layout could not be restored."""
    rep = lab_steps_report(results, names)
    if layout is not None and not layout.get("ok", True):
        rep["ok"] = False
        rep["findings"] = [{"kind": "layout", "line": "the boot layout could not be restored before the iteration",
                            "context": []}] + layout.get("findings", []) + rep["findings"]
    rep["layout"] = {k: (layout or {}).get(k) for k in ("changed", "extra", "missing", "ok")}
    return rep



def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def measured_count(value):
    """How many measured values a metric holds (see the module's docstring)."""
    if value is None:
        return 0
    if isinstance(value, list):
        return sum(measured_count(v) if isinstance(v, (list, dict)) else (1 if _is_number(v) else 0)
                   for v in value)
    if isinstance(value, dict):
        if "n" in value and _is_number(value["n"]):
            return int(value["n"])
        return sum(measured_count(v) for v in value.values())
    # a number, or text that says something ('' or "None" from templating: nothing)
    return 1 if _is_number(value) or (isinstance(value, str) and value.strip() not in ("", "None")) else 0


def _numbers(value, where):
    """(where, number) for every number under value."""
    if _is_number(value):
        yield where, value
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{where}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            if k != "n":
                yield from _numbers(v, f"{where}.{k}")


def _count(value):
    """A count: a number as it is, a list's or a dict's entries; None when
    it is neither."""
    if isinstance(value, (list, dict)):
        return len(value)
    return value if _is_number(value) else None


def _int(value, what):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise JudgeError(f"scenario_expect.{what} must be a whole number, not {value!r}") from None


def _reports_wanted(expect):
    """The reports a declaration asks for: `reports`, else `iterations`."""
    for key in ("reports", "iterations"):
        if (expect or {}).get(key) is not None:
            return _int(expect[key], key)
    return None


def _iterations(expect, reports, failed):
    """(iterations, failures) of a record: counted in iterations when one
    makes several reports (quick-swap: its swaps, its layout and its end
    check), else in reports."""
    n, want = len(reports), _reports_wanted(expect)
    its = (expect or {}).get("iterations")
    if its is None or not want:
        return n, failed
    its = _int(its, "iterations")
    done = min(its, -(-n * its // want))     # ceil(n / (want / its))
    return done, min(failed, done) if done else failed


def declaration_findings(name, expect, reports, metrics):
    """The judge's own findings of a record: data missing (no-data) and
    values that cannot be true (measurement)."""
    expect = expect or {}
    unknown = set(expect) - {"iterations", "reports", "measured", "nonempty", "at_least", "at_most", "after_event"}
    if unknown:
        raise JudgeError(f"scenario_expect of {name} has unknown keys {sorted(unknown)}")
    metrics = metrics or {}
    out = []
    want = _reports_wanted(expect)
    if want is not None:
        have = len(reports)
        if have < want:
            out.append(_finding(NO_DATA, f"{name}: {have} of {want} iteration reports (the rest never reported)"))
        elif have > want:
            out.append(_finding(MEASUREMENT, f"{name}: {have} iteration reports where the profile asked for {want}"))
    for path, want in (expect.get("measured") or {}).items():
        want = _int(want, f"measured.{path}")
        have = measured_count(resolve(metrics, path))
        if have < want:
            out.append(_finding(NO_DATA, f"{name}: metric {path} measured {have} value(s), "
                                         f"the profile put {want} there"))
    for path in expect.get("nonempty") or []:
        value = resolve(metrics, path)
        if not value:
            out.append(_finding(NO_DATA, f"{name}: {path} is empty where the profile promised entries"))
    for path, least in (expect.get("at_least") or {}).items():
        least = _int(least, f"at_least.{path}")
        count = _count(resolve(metrics, path))
        if count is None or count < least:
            out.append(_finding(NO_DATA, f"{name}: {path} is {'missing' if count is None else count}, "
                                         f"the profile put {least} there"))
    for path, most in (expect.get("at_most") or {}).items():
        most = _int(most, f"at_most.{path}")
        count = _count(resolve(metrics, path))
        if count is not None and count > most:
            out.append(_finding(MEASUREMENT, f"{name}: {path} is {count}, more than the {most} the profile put there"))
    for path in expect.get("after_event") or []:
        for where, v in _numbers(resolve(metrics, path), path):
            if v < 0:
                out.append(_finding(MEASUREMENT, f"{name}: {where} = {v} ms, before the event it is measured from"))
    for bad in _impossible(metrics):
        what = bad.get("what", "a value")
        out.append(_finding(MEASUREMENT, f"{name}: {what} = {bad.get('value')}: {bad.get('why', 'cannot be true')}",
                            [f"{k}: {v}" for k, v in sorted(bad.items()) if k not in ("what", "value", "why")]))
    return out


def _impossible(value):
    """Every entry of every `impossible` list in the metrics, at any depth
    (a scenario may nest another's metrics)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "impossible" and isinstance(v, list):
                yield from (b for b in v if isinstance(b, dict))
            else:
                yield from _impossible(v)
    elif isinstance(value, list):
        for v in value:
            yield from _impossible(v)


def _report_failed(rep):
    return not rep.get("ok", False) or bool(rep.get("findings"))


def verdict(record):
    """The status of a record from its findings and whether it was skipped
    (expected failures: apply_expected)."""
    if record.get("findings"):
        return "fail"
    return "skip" if record.get("skip") else "pass"


def judge_record(base, reports=None, expect=None, metrics=None, findings=None, skip=None, observations=None):
    """A scenario's record: base (name, vm, variant, seconds) with its
    status, iterations, failures, metrics and findings. reports: the
    iteration reports ({ok, findings, ...}); findings: the scenario's own
    beyond its reports'; skip: why the scenario could not run here (a
    record that also has findings fails); observations: what it saw that
    fails nothing (kept in the record as they are)."""
    name = base.get("name", "?")
    reports = [r for r in (reports or []) if isinstance(r, dict)]
    metrics = metrics if isinstance(metrics, dict) else {}
    found = list(findings or [])
    for i, rep in enumerate(reports, 1):
        own = list(rep.get("findings") or [])
        found += own
        if not rep.get("ok", False) and not own:
            found.append(_finding(UNEXPLAINED, f"{name} iteration {i} failed, and nothing it ran said why"))
    found += declaration_findings(name, expect, reports, metrics)
    failed = sum(1 for r in reports if _report_failed(r))
    iterations, failed = _iterations(expect, reports, failed)
    rec = dict(base)
    rec.update({"iterations": iterations, "metrics": metrics, "findings": found})
    if skip:
        rec["skip"] = str(skip)
    if observations:
        rec["observations"] = list(observations)
    rec["status"] = verdict(rec)
    rec["failures"] = max(failed, 1) if rec["status"] == "fail" else 0
    # a failure is of at least one iteration (a failure rate stays <= 1)
    rec["iterations"] = max(rec["iterations"], rec["failures"])
    return rec


def add_findings(record, findings):
    """The record with those findings it does not have yet (same kind, line
    and time: a later scan that covered a window again finds the same
    record; the log window's close finds all of them again) added, judged
    again: any new one fails it. One the scenario keeps as an observation
    (what it measures rather than fails on) is not new either."""
    rec = dict(record)
    have = {(f.get("kind"), f.get("line"), f.get("time"))
            for f in list(rec.get("findings") or []) + list(rec.get("observations") or [])}
    new = []
    for f in findings or []:
        key = (f.get("kind"), f.get("line"), f.get("time"))
        if key not in have:
            have.add(key)
            new.append(f)
    if new:
        rec["findings"] = list(rec.get("findings") or []) + new
        rec["status"] = verdict(rec)
        rec["failures"] = max(int(rec.get("failures") or 0), 1)
        rec["iterations"] = max(int(rec.get("iterations") or 0), rec["failures"])
    return rec


PLACEHOLDER = re.compile(r"\$\{([a-zA-Z0-9_.]+)\}")
ENTRY_KEYS = {"scenario", "kind", "match", "context", "reason", "profile", "scope"}


def check_entry(e, where="expected failure"):
    """An expected-failure entry the judge can use: its scenario, the
    finding's kind, a regular expression of the finding's line (`match`)
    and optionally one that a line of the finding's context must match
    (`context`); it names the slot, port or device it may match through a
    ${PATH} of the record's metrics (`${slot}`), or says in `scope` why it
    cannot. Raises JudgeError naming what to fix."""
    if not isinstance(e, dict):
        raise JudgeError(f"{where}: an entry is a mapping, not {e!r}")
    unknown = set(e) - ENTRY_KEYS
    if unknown:
        raise JudgeError(f"{where} of {e.get('scenario')}: unknown keys {sorted(unknown)}")
    for key in ("scenario", "kind", "match", "context", "scope", "reason"):
        if e.get(key) is not None and not isinstance(e[key], str):
            raise JudgeError(f"{where} of {e.get('scenario')}: '{key}' must be text, not {e[key]!r}")
    if not e.get("scenario") or not e.get("kind") or not e.get("match"):
        raise JudgeError(f"expected failure of {e.get('scenario')} needs 'scenario', 'kind' (the "
                         f"finding's kind) and 'match' (a regular expression of its line): {e}")
    if e["kind"] in (NO_DATA, MEASUREMENT, UNEXPLAINED):
        raise JudgeError(f"expected failure of {e.get('scenario')}: a '{e['kind']}' finding is the "
                         f"judge's own and is never expected: {e}")
    if not e["match"].startswith("^") or not e["match"].endswith("$"):
        raise JudgeError(f"expected failure of {e['scenario']} ({e['kind']}): 'match' must be anchored "
                         f"(^...$): a prefix would take any line that starts alike: {e['match']!r}")
    named = PLACEHOLDER.search(e["match"] + (e.get("context") or ""))
    if not named and not e.get("scope"):
        raise JudgeError(f"expected failure of {e['scenario']} ({e['kind']}): name the slot, port or device it "
                         f"may match (${{PATH}} of the record's metrics, e.g. ${{slot}}) or say in 'scope' why "
                         f"it cannot")
    for key in ("match", "context"):
        if e.get(key):
            try:
                re.compile(PLACEHOLDER.sub("x", e[key]))
            except re.error as err:
                raise JudgeError(f"expected failure of {e['scenario']}: {key} is no regular expression "
                                 f"({err}): {e[key]!r}") from None
    return e


def load_expected(directory, variant):
    """kernel/expected-failures/<variant>.yml as a checked list: a file is a
    list of entries, or {inherit: VARIANT, entries: [...]} for the entries
    of another variant's file followed by its own."""
    seen = []
    entries = []
    name = variant
    while name is not None:
        if name in seen:
            raise JudgeError(f"expected failures: {' -> '.join(seen + [name])} inherit in a circle")
        seen.append(name)
        path = os.path.join(directory, f"{name}.yml")
        try:
            with open(path) as f:
                data = yaml.safe_load(f)
        except OSError as err:
            raise JudgeError(f"expected failures of {variant}: cannot read {path}: {err}") from None
        if isinstance(data, dict):
            if set(data) - {"inherit", "entries"}:
                raise JudgeError(f"{path}: a mapping takes 'inherit' and 'entries' only")
            own, name = data.get("entries") or [], data.get("inherit")
        else:
            own, name = data or [], None
        entries = [check_entry(e, path) for e in own] + entries
    return entries


def _fill(pattern, metrics):
    """The pattern with each ${PATH} replaced by the record's metric there
    (escaped); None when a metric it names is missing."""
    missing = []

    def value(m):
        v = resolve(metrics or {}, m.group(1))
        if v is None or isinstance(v, (dict, list)):
            missing.append(m.group(1))
            return ""
        return re.escape(str(v))
    out = PLACEHOLDER.sub(value, pattern)
    return None if missing else out


def entry_matches(e, finding, metrics):
    """Whether an expected-failure entry takes this finding of a record
    with these metrics."""
    if e["kind"] != finding.get("kind"):
        return False
    match = _fill(e["match"], metrics)
    if match is None or not re.search(match, finding.get("line", "")):
        return False
    if e.get("context"):
        ctx = _fill(e["context"], metrics)
        return ctx is not None and any(re.search(ctx, c) for c in finding.get("context") or [])
    return True


def apply_expected(records, expected, profile=None):
    """Marks failed records whose every finding is a known failure of the
    kernel variant (kernel/expected-failures/<variant>.yml, load_expected)
    as 'xfail'. expected: that list, or {variant: list} for a run of several
    variants (each record has its VM's variant). An entry (check_entry)
    matches a finding of its scenario only when the finding is of the
    entry's kind, its line matches the entry's anchored expression with the
    record's own slot, port or device filled in, and (with `context`) a line
    of its context matches too: the same words from another check, another
    slot, or a kernel-log line where a step failure is expected, still fail.
    A finding of the judge's own (no-data, measurement) is never expected.
    An entry with 'profile' (e.g. {lab_dpc: true}) applies only to a run
    whose profile has those values."""
    out = []
    for rec in records:
        rec = dict(rec)
        known = expected.get(rec.get("variant"), []) if isinstance(expected, dict) else expected
        entries = [check_entry(e) for e in known or [] if not isinstance(e, dict) or e.get("scenario") == rec.get("name")]
        entries = [e for e in entries
                   if all((profile or {}).get(k) == v for k, v in (e.get("profile") or {}).items())]
        findings = rec.get("findings") or []
        rec["status"] = verdict(rec)
        if rec["status"] == "fail" and entries:
            reasons = []
            for f in findings:
                hit = next((e for e in entries if entry_matches(e, f, rec.get("metrics"))), None)
                if not hit:
                    reasons = None
                    break
                reasons.append(hit.get("reason", ""))
            if reasons:
                rec["status"] = "xfail"
                rec["expected_failure"] = sorted(set(reasons))
        out.append(rec)
    return out


def run_status(records):
    """A run passes when it has at least one record and none failed."""
    records = list(records or [])
    if not records:
        return "fail"
    return "fail" if any(r.get("status") == "fail" for r in records) else "pass"
