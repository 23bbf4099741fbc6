"""The judge's filters (lab/plugins/lab_judge.py: every status is computed
there): a scenario's record from its declaration, reports, metrics and
findings; a record judged again with more findings; the run's status
(the known failures of a kernel variant: lab_results.lab_apply_expected)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab_judge  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402


def _checked(fn):
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except lab_judge.JudgeError as e:
            raise AnsibleFilterError(str(e)) from None
    wrapper.__doc__ = fn.__doc__
    return wrapper


class FilterModule:
    def filters(self):
        return {
            "lab_judge_record": _checked(lab_judge.judge_record),
            "lab_add_findings": _checked(lab_judge.add_findings),
            "lab_run_status": _checked(lab_judge.run_status),
            # kernel/expected-failures/<variant>.yml, inheritance resolved and each entry checked
            "lab_expected_failures": _checked(lambda variant, directory: lab_judge.load_expected(directory, variant)),
        }
