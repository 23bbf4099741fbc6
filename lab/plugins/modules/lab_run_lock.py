#!/usr/bin/python3
"""One run at a time per name prefix.

Two runs with one lab_name_prefix would define, boot and tear down the
same domains. The validate phase takes DIR/<prefix>.lock for the run's
ansible-playbook (OWNER, its pid) and the results phase gives it back.
The lock is a file created with O_EXCL (atomic: of two runs starting at
once, one wins) holding the owner's pid, its start time (so a reused pid
is not taken for the owner) and the run id. A lock whose owner is gone
(killed run) is taken over, and said so.
"""

DOCUMENTATION = r"""
module: lab_run_lock
short_description: take or give back the lock of a pciehp-lab run's name prefix
options:
  dir: {description: directory of the locks (made 0700), required: true, type: path}
  prefix: {description: the run's lab_name_prefix, required: true, type: str}
  owner: {description: pid of the run's ansible-playbook, required: true, type: int}
  run_id: {description: the run id (said to a refused run), required: true, type: str}
  state: {description: present (take) or absent (give back), choices: [present, absent], default: present, type: str}
"""

import json
import os
import re
import stat
import time

from ansible.module_utils.basic import AnsibleModule


def start_time(pid):
    """The process's start time in clock ticks (field 22 of stat), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def read_lock(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd) as f:
        try:
            return json.load(f)
        except ValueError:
            return {}


def alive(holder):
    pid = holder.get("pid")
    return isinstance(pid, int) and start_time(pid) is not None and start_time(pid) == holder.get("start")


def main():
    m = AnsibleModule(argument_spec=dict(
        dir=dict(type="path", required=True), prefix=dict(type="str", required=True),
        owner=dict(type="int", required=True), run_id=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent"])))
    p = m.params
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}", p["prefix"]):
        m.fail_json(msg=f"lab_run_lock: name prefix {p['prefix']!r} is not a plain name")
    os.makedirs(p["dir"], mode=0o700, exist_ok=True)
    st = os.lstat(p["dir"])
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        m.fail_json(msg=f"lab_run_lock: {p['dir']} must be a directory of uid {os.geteuid()} with mode 0700")
    path = os.path.join(p["dir"], p["prefix"] + ".lock")
    me = {"pid": p["owner"], "start": start_time(p["owner"]), "run_id": p["run_id"],
          "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if p["state"] == "absent":
        holder = read_lock(path)
        if holder is not None and holder.get("pid") == me["pid"] and holder.get("start") == me["start"]:
            os.unlink(path)
            m.exit_json(changed=True)
        m.exit_json(changed=False)
    if me["start"] is None:
        m.fail_json(msg=f"lab_run_lock: the run's ansible-playbook pid {p['owner']} is not running")
    taken_over = None
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            holder = read_lock(path)
            if holder is None:
                continue
            if holder.get("pid") == me["pid"] and holder.get("start") == me["start"]:
                m.exit_json(changed=False, lock=path)
            if alive(holder):
                m.fail_json(msg=f"another run uses lab_name_prefix={p['prefix']}: run "
                                f"{holder.get('run_id')} (ansible-playbook pid {holder.get('pid')}, since "
                                f"{holder.get('since')}); wait for it to end or choose another lab_name_prefix",
                            holder=holder)
            # its owner is gone (a killed run): take the lock over
            taken_over = holder
            os.unlink(path)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        m.exit_json(changed=True, lock=path, taken_over=taken_over)
    m.fail_json(msg=f"lab_run_lock: could not take {path}")


if __name__ == "__main__":
    main()
