"""Helpers shared by the lab's filter plugins and the tests (one copy each).

A filter plugin imports them with its parent directory on sys.path
(Ansible loads filter files by path, with no package around them):

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from lab_common import json_object  # noqa: E402
"""

import json


def json_object(text):
    """A JSON object from text (or a dict Ansible's templating already made
    of it); None when it is no JSON object."""
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else None
    except (TypeError, ValueError):
        return None


def p50_max(values):
    """{"p50", "max", "n"} of the values that are not None (upper median)."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return {"p50": None, "max": None, "n": 0}
    return {"p50": round(values[len(values) // 2], 3), "max": round(values[-1], 3), "n": len(values)}
