"""Profile checks from the one declaration, lab/profile.yml.

The validate phase hands every lab_* name it can see and the values of the
declared ones to lab_profile_check before anything is created. A value is
checked against its declaration (type, range or choices, what it needs);
names nobody declared are refused with the closest declared one. The
relations between fields (drives and slots, JBOF numbering, firmware slots)
are checked next by lab_validate_profile (lab_topology.py).

Every check raises AnsibleFilterError with a message that starts with
"profile field <name>" and says what to fix.
"""

import copy
import difflib
import os
import re

import yaml
from ansible.errors import AnsibleFilterError

SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "profile.yml")

# Plain names become libvirt domain names, directory names and XML text:
# one pattern for all of them (lab_run_lock checks the prefix with it too).
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}"
PATH_CHARS = re.compile(r"[A-Za-z0-9._+/-]+")
# Directories the lab must never own: it deletes below its paths.
SYSTEM_DIRS = {
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/lost+found",
    "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
    "/run/lock", "/run/user", "/usr/bin", "/usr/games", "/usr/include", "/usr/lib", "/usr/lib32",
    "/usr/lib64", "/usr/libexec", "/usr/local", "/usr/sbin", "/usr/share", "/usr/src",
    "/var/backups", "/var/cache", "/var/lib", "/var/local", "/var/lock", "/var/log", "/var/mail",
    "/var/opt", "/var/run", "/var/spool", "/var/tmp", "/var/lib/libvirt", "/var/lib/libvirt/images",
    "/usr/local/bin", "/usr/local/lib", "/usr/local/sbin", "/usr/local/share", "/usr/local/src",
}
TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


_schemas = {}


def load_schema(path=None):
    """The declaration (lab/profile.yml, or a copy a test names), read once
    a process: every reader of a range, choice or default shares it, so
    nothing changes it."""
    path = os.path.abspath(path or SCHEMA_PATH)
    if path not in _schemas:
        with open(path, encoding="utf-8") as f:
            _schemas[path] = yaml.safe_load(f)
    return _schemas[path]


def lab_profile_schema(_unused=None):
    """The declaration, for playbooks (``{{ none | lab_profile_schema }}``)."""
    return copy.deepcopy(load_schema())


def _fail(name, value, what):
    raise AnsibleFilterError(f"profile field {name}={_show(value)} {what}")


def _show(value):
    if isinstance(value, str):
        return repr(value) if not value or re.search(r"[^A-Za-z0-9._+/:,-]", value) else value
    return repr(value)


def _int(name, value, spec):
    if isinstance(value, bool):
        _fail(name, value, "is not a whole number")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,12}", value):
        number = int(value)
    else:
        _fail(name, value, "is not a whole number")
    lo, hi = spec.get("min"), spec.get("max")
    if lo is not None and number < lo or hi is not None and number > hi:
        _fail(name, value, f"is out of range: use {lo} to {hi}")
    return number


def _bool(name, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in TRUE + FALSE:
        return value.lower() in TRUE
    _fail(name, value, "must be true or false")
    return None


def _name(name, value, spec):
    pattern = spec.get("pattern", NAME_PATTERN)
    if value == "" and spec.get("default") == "":
        return value        # empty: the lab chooses (a run id from the time)
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        _fail(name, value, f"must be a plain name matching {pattern} (letters, digits, and the few "
                           f"punctuation marks named there; it becomes a domain name, a directory or XML)")
    if value in spec.get("reserved", []) or ".." in value:
        _fail(name, value, f"is reserved: {', '.join(spec.get('reserved', []))} and names with '..' "
                           f"are not run names")
    return value


def check_path(name, value):
    """An absolute, normalised path of plain characters, not a system
    directory. Returns it, or fails saying what to fix."""
    if not isinstance(value, str) or not value.startswith("/"):
        _fail(name, value, "must be an absolute path (it is used from several directories and hosts)")
    if not PATH_CHARS.fullmatch(value):
        _fail(name, value, "may hold only letters, digits and . _ + - / (it reaches QEMU options, "
                           "XML and command lines)")
    if os.path.normpath(value) != value or value.startswith("//"):
        _fail(name, value, f"is not normalised: write {os.path.normpath(value)}")
    parts = [p for p in value.split("/") if p]
    if len(parts) < 2 or value in SYSTEM_DIRS or any(p.startswith("-") for p in parts):
        _fail(name, value, "is a system directory or too close to the root: the lab deletes below "
                           "it, so give it a directory of its own (e.g. /var/lib/pciehp-lab)")
    return value


def _url(name, value, spec):
    schemes = spec.get("schemes", ["http", "https"])
    if not isinstance(value, str) or not re.fullmatch(r"[a-z0-9+]+://[A-Za-z0-9@._:/?=&%+~-]*", value):
        _fail(name, value, "must be a URL of plain characters (no spaces, quotes or newlines)")
    scheme = value.split("://", 1)[0]
    if scheme not in schemes:
        _fail(name, value, f"has scheme {scheme}: use one of {', '.join(schemes)}")
    return value


def _text(name, value, spec):
    if not isinstance(value, str) or not re.fullmatch(r"[\x20-\x7e]*", value):
        _fail(name, value, "must be one line of printable ASCII")
    if len(value) > spec.get("max_length", 1024):
        _fail(name, value, f"is longer than {spec.get('max_length', 1024)} characters")
    return value


def _seed(name, value):
    if value in ("", None):
        return ""
    return _int(name, value, {"min": 0, "max": 2**31 - 1})


def _list(name, value, spec, scenarios):
    if isinstance(value, str) and spec.get("comma_string"):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        _fail(name, value, "must be a list (JSON, e.g. -e '{\"%s\": [...]}')" % name)
    if len(value) > spec.get("max_items", 1000):
        _fail(name, value, f"has {len(value)} items: at most {spec.get('max_items', 1000)}")
    if len(value) < spec.get("min_items", 0):
        _fail(name, value, f"has {len(value)} items: at least {spec['min_items']}")
    item = spec.get("item", {})
    if item.get("type") == "scenario":
        if not value:
            _fail(name, value, "must name at least one scenario")
        unknown = [v for v in value if v not in scenarios]
        if unknown:
            raise AnsibleFilterError(
                f"profile field {name} names unknown scenario(s) {', '.join(map(str, unknown))}: known are "
                f"{', '.join(sorted(scenarios))}")
        out = list(value)
    else:
        out = [check_value(f"{name}[{i}]", v, item, scenarios) for i, v in enumerate(value)]
    if spec.get("unique") and len(set(map(str, out))) != len(out):
        _fail(name, value, "names an item twice")
    return out


def check_value(name, value, spec, scenarios=()):
    kind = spec.get("type")
    if kind == "int":
        return _int(name, value, spec)
    if kind == "bool":
        return _bool(name, value)
    if kind == "choice":
        if value not in spec["choices"]:
            _fail(name, value, f"is unknown: use one of {', '.join(spec['choices'])}")
        return value
    if kind == "name":
        return _name(name, value, spec)
    if kind == "path":
        # empty: unset, where that is the default (lab_kernel_tree)
        return value if value == "" and spec.get("default") == "" else check_path(name, value)
    if kind == "url":
        return _url(name, value, spec)
    if kind == "text":
        return _text(name, value, spec)
    if kind == "seed":
        return _seed(name, value)
    if kind == "list":
        return _list(name, value, spec, scenarios)
    raise AnsibleFilterError(f"lab/profile.yml declares {name} with unknown type {kind!r}")


def lab_profile_check(values, names, extra, known_scenarios, schema=None):
    """Check every lab_* input of a run. VALUES: the declared variables'
    values; NAMES: every lab_* variable name the run can see; EXTRA: the
    variables given with -e, raw. Returns the checked values (numbers as
    numbers, lists as lists)."""
    schema = schema or load_schema()
    extra_names = set(extra)
    for n, raw in sorted(extra.items()):
        _raw_plain(n, raw)
    declared = schema["variables"]
    allowed = set(declared) | set(schema.get("host_variables", {}))
    internal = set(schema.get("internal", []))
    for n in sorted(set(names) | set(extra_names)):
        if not n.startswith("lab_") or n in declared or n in allowed and n not in extra_names:
            continue
        if n in internal or n in allowed:
            if n in extra_names:
                raise AnsibleFilterError(f"profile field {n} is set by the lab itself (or its inventory), "
                                         f"not by a profile: drop -e {n}")
            continue
        close = difflib.get_close_matches(n, sorted(declared), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else "lab/profile.yml lists the profile's variables"
        raise AnsibleFilterError(f"profile field {n} is unknown: {hint}")
    out = {}
    for n, spec in declared.items():
        value = values.get(n, spec.get("default"))
        out[n] = check_value(n, value, spec, known_scenarios)
    for n, spec in declared.items():
        needs = spec.get("needs")
        if not needs or out[n] == check_value(n, spec.get("default"), spec, known_scenarios):
            continue
        for other, want in needs.items():
            if out[other] != want:
                raise AnsibleFilterError(f"profile field {n}={_show(_plain(out[n]))} needs {other}={_plain(want)}: "
                                         f"{spec.get('why', '')}")
    return out


def _raw_plain(name, raw):
    """A value as given with -e: no Jinja (templating would run it) and no
    control character (templating drops a trailing newline, XML and shells
    do not)."""
    if isinstance(raw, dict):
        for k, v in raw.items():
            _raw_plain(f"{name}.{k}", v)
    elif isinstance(raw, list):
        for i, v in enumerate(raw):
            _raw_plain(f"{name}[{i}]", v)
    elif isinstance(raw, str):
        if re.search(r"\{\{|\{%|\{#", raw):
            _fail(name, raw, "holds a Jinja expression: give the value itself")
        if re.search(r"[\x00-\x1f\x7f]", raw):
            _fail(name, raw, "holds a control character (a newline, a tab, ...): give one plain line")


def _plain(value):
    if isinstance(value, bool):
        return str(value).lower()
    return value


def lab_host_check(hosts, hostvars, schema=None):
    """Check the hypervisor hosts' own lab variables (lab_libvirt_uri)."""
    schema = schema or load_schema()
    for host in hosts:
        for n, spec in schema.get("host_variables", {}).items():
            if n not in hostvars[host]:
                raise AnsibleFilterError(f"inventory host {host} has no {n}: set it (e.g. qemu:///system)")
            try:
                check_value(n, hostvars[host][n], spec)
            except AnsibleFilterError as e:
                raise AnsibleFilterError(f"inventory host {host}: {e.message}") from None
    return hosts


class FilterModule:
    def filters(self):
        return {
            "lab_profile_check": lab_profile_check,
            "lab_host_check": lab_host_check,
            "lab_profile_schema": lab_profile_schema,
        }


def lab_profile_doc(schema):
    """docs/profile.md: the variable table, generated from the declaration
    (regenerate: /usr/bin/python3 lab/plugins/filter/lab_profile.py > docs/profile.md)."""
    def rng(spec):
        kind = spec["type"]
        if kind == "int":
            return f"{spec.get('min')}..{spec.get('max')}"
        if kind == "choice":
            return " | ".join(spec["choices"])
        if kind == "list":
            item = spec.get("item", {})
            inner = "scenario names" if item.get("type") == "scenario" else \
                f"{item.get('type')} {rng(item)}".strip()
            return f"list of {inner}, at most {spec.get('max_items', 1000)}"
        if kind == "name":
            extra = f"; not {', '.join(spec['reserved'])}" if spec.get("reserved") else ""
            return f"plain name `{spec.get('pattern', NAME_PATTERN)}`{extra}"
        if kind == "path":
            return "absolute path, not a system directory"
        if kind == "url":
            return "URL: " + ", ".join(spec.get("schemes", ["http", "https"]))
        if kind == "text":
            return "one line of printable ASCII"
        if kind == "seed":
            return "empty or 0..2147483647"
        return "true | false" if kind == "bool" else ""

    def cell(text):
        return str(text).replace("|", "\\|")

    lines = ["# Profile variables", "",
             "Generated from `lab/profile.yml` by `/usr/bin/python3 lab/plugins/filter/lab_profile.py`;",
             "edit the declaration, not this file. Give them with `-e NAME=VALUE`, `-e '{\"NAME\": [...]}'`",
             "or a preset (`-e @profiles/<name>.yml`). Validation refuses any other `lab_*` name.", "",
             "| variable | type | values | default | needs | meaning |", "|---|---|---|---|---|---|"]
    for name, spec in schema["variables"].items():
        default = spec.get("default")
        shown = "`" + (yaml.safe_dump(default, default_flow_style=True, width=1000).strip()
                       .removesuffix("\n...").removesuffix(" ...").strip()) + "`"
        if default == "":
            shown = '`""`'
        needs = ", ".join(f"`{k}={_plain(v)}`" for k, v in spec.get("needs", {}).items())
        lines.append(f"| `{name}` | {spec['type']} | {cell(rng(spec))} | {cell(shown)} | {needs} | "
                     f"{cell(spec.get('help', ''))} |")
    lines += ["", "Variables of each hypervisor host (inventory group `hypervisors`):", "",
              "| variable | values | meaning |", "|---|---|---|"]
    for name, spec in schema.get("host_variables", {}).items():
        lines.append(f"| `{name}` | {cell(rng(spec))} | {cell(spec.get('help', ''))} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(lab_profile_doc(load_schema()), end="")
