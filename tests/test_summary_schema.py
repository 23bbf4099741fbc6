"""docs/summary.schema.json: the shape of every summary.json. Every
summary a test produces is validated by conftest.load_summary; here the
schema itself, the reference results and the records it must refuse."""

import copy
import json

import jsonschema
import pytest

from conftest import REPO, SUMMARY_SCHEMA

SCHEMA = json.loads(SUMMARY_SCHEMA.read_text())
# reference results written before a rule of the schema was enforced by the
# lab itself, with the rule they break
BEFORE_THE_RULE = {
    "rerun1": "a failure names what failed: smoke failed on its drive-slot-1 check with no finding "
              "(lab_probe_report now turns failed checks into findings)",
}


def errors(summary):
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(summary)]


def test_the_schema_is_a_draft7_schema():
    jsonschema.Draft7Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("run", sorted(p.parent.name for p in (REPO / "reference-results").glob("*/summary.json")))
def test_reference_results_match_the_schema(run):
    found = errors(json.loads((REPO / "reference-results" / run / "summary.json").read_text()))
    if run in BEFORE_THE_RULE:
        assert found, f"{run} matches now: take it off BEFORE_THE_RULE"
        assert all("findings" in e for e in found), found
    else:
        assert not found, found


def test_the_schema_refuses_what_a_verdict_must_not_be():
    good = json.loads((REPO / "reference-results/series-ab3/summary.json").read_text())
    assert not errors(good)
    rec = next(i for i, r in enumerate(good["scenarios"]) if r["status"] == "pass")
    bad = copy.deepcopy(good)
    bad["scenarios"][rec]["findings"] = [{"kind": "warning", "line": "WARNING: x", "context": []}]
    assert any("findings" in e for e in errors(bad)), "a pass with a finding"
    bad["scenarios"][rec]["findings"][0]["kind"] = "race"
    assert not errors(bad), "quick-swap's races are reported in a passing record"
    bad = copy.deepcopy(good)
    bad["scenarios"][rec]["status"] = "fail"
    assert any("findings" in e for e in errors(bad)), "a failure that names nothing"
    bad = copy.deepcopy(good)
    bad["scenarios"][rec]["status"] = "ok"
    assert errors(bad), "an unknown status"
    bad = copy.deepcopy(good)
    del bad["limits"]
    assert any("limits" in e for e in errors(bad)), "no statement of what the emulation cannot show"
    bad = copy.deepcopy(good)
    bad["scenarios"][rec]["status"] = "xfail"
    bad["scenarios"][rec]["findings"] = [{"kind": "warning", "line": "WARNING: x", "context": []}]
    assert any("expected_failure" in e for e in errors(bad)), "an xfail without its reason"
