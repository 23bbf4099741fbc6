"""Escaping for the places profile values end up in besides XML text
(for XML, Jinja's own ``e`` filter): QEMU's option strings."""

import re

from ansible.errors import AnsibleFilterError


def lab_qemu_opt(value):
    """A value inside a QEMU -chardev/-blockdev option string: QEMU splits
    on ',' and takes ',,' for a literal comma. Control characters have no
    escape there and are refused."""
    value = str(value)
    if re.search(r"[\x00-\x1f\x7f]", value):
        raise AnsibleFilterError(f"{value!r} has a control character and cannot be a QEMU option value")
    return value.replace(",", ",,")


class FilterModule:
    def filters(self):
        return {"lab_qemu_opt": lab_qemu_opt}
