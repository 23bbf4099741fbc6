#!/usr/bin/python3
"""Create or remove a directory the lab owns, and nothing else.

Every directory the lab deletes (a run's results, a VM's overlay and
drives) goes through this module. It is removed only when
  - it lies strictly inside ROOT (after resolving links: a path with '..'
    or a planted symlink cannot lead out),
  - it is a real directory (not a link) carrying the MARKER file that
    state=directory left in it when the lab created it,
  - no file system is mounted anywhere below it.
Anything else is refused with a message saying what to fix; nothing is
deleted then.
"""

DOCUMENTATION = r"""
module: lab_tree
short_description: create or remove a directory that the lab made (marker file), inside a root
options:
  path: {description: the directory, required: true, type: path}
  root: {description: the directory PATH must lie strictly inside, required: true, type: path}
  marker: {description: file name that marks the directory as the lab's, required: true, type: str}
  state: {description: directory (create, with the marker) or absent (remove), choices: [directory, absent], default: directory, type: str}
  mode: {description: mode of a created directory, default: "0755", type: raw}
  owner: {description: owner of a created directory, type: str}
  group: {description: group of a created directory, type: str}
"""

import os
import shutil
import stat

from ansible.module_utils.basic import AnsibleModule


def inside(path, root):
    """PATH resolved lies strictly below ROOT resolved."""
    real_root = os.path.realpath(root)
    parent = os.path.realpath(os.path.dirname(os.path.normpath(path)))
    full = os.path.join(parent, os.path.basename(os.path.normpath(path)))
    return os.path.commonpath([real_root, full]) == real_root and full != real_root, full


def mounts_below(path):
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == path or point.startswith(path + "/"):
                found.append(point)
    return found


def main():
    m = AnsibleModule(argument_spec=dict(
        path=dict(type="path", required=True), root=dict(type="path", required=True),
        marker=dict(type="str", required=True),
        state=dict(type="str", default="directory", choices=["directory", "absent"]),
        mode=dict(type="raw", default="0755"), owner=dict(type="str"), group=dict(type="str")),
        supports_check_mode=False)
    p = m.params
    path, root, marker = p["path"], p["root"], p["marker"]
    if not os.path.isabs(path) or not os.path.isabs(root):
        m.fail_json(msg=f"lab_tree: {path} and {root} must be absolute paths")
    if "/" in marker or marker in ("", ".", ".."):
        m.fail_json(msg=f"lab_tree: marker {marker!r} must be a file name")
    ok, full = inside(path, root)
    if not ok:
        m.fail_json(msg=f"refusing to touch {path}: it does not lie inside {root} (it resolves to {full}); "
                        f"fix the profile value that named it")
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        st = None
    if p["state"] == "absent":
        if st is None:
            m.exit_json(changed=False, path=full)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            m.fail_json(msg=f"refusing to remove {full}: it is not a directory the lab made "
                            f"(a link or a file); remove it yourself if it is yours to remove")
        if not os.path.isfile(os.path.join(full, marker)):
            m.fail_json(msg=f"refusing to remove {full}: it has no {marker}, so the lab did not make it; "
                            f"move it away or choose another name (run id, name prefix)")
        mounted = mounts_below(full)
        if mounted:
            m.fail_json(msg=f"refusing to remove {full}: {', '.join(mounted)} is mounted below it; unmount first")
        shutil.rmtree(full)
        m.exit_json(changed=True, path=full)
    changed = False
    if st is None:
        os.makedirs(full, exist_ok=True)
        changed = True
    elif stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        m.fail_json(msg=f"refusing to use {full}: it exists and is not a directory (a link or a file)")
    elif not os.path.isfile(os.path.join(full, marker)) and os.listdir(full):
        m.fail_json(msg=f"refusing to use {full}: it exists, is not empty and has no {marker}, so the lab "
                        f"did not make it; move it away or choose another name (run id, name prefix)")
    mark = os.path.join(full, marker)
    if not os.path.isfile(mark):
        fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        os.write(fd, b"made by pciehp-lab; the lab deletes this directory when it needs to\n")
        os.close(fd)
        changed = True
    args = dict(path=full, mode=p["mode"], owner=p["owner"], group=p["group"])
    changed = m.set_fs_attributes_if_different(m.load_file_common_arguments(args), changed)
    m.exit_json(changed=changed, path=full)


if __name__ == "__main__":
    main()
