"""Connection to the lab's guests: community.libvirt.libvirt_qemu, patient.

Under TCG on a loaded host the guest agent now and then answers after
libvirt's 5 s; libvirt reports "Guest agent is not responding" and, until
the agent catches up, "Guest agent not available for now". The collection's
plugin turns either into a failed task, which ends that VM's part of the run
although the guest is fine (seen with seven VMs on two cores). This plugin
retries such agent calls for up to `agent_patience` seconds. A guest-exec is
retried only when libvirt refused to send it, so no command runs twice; a
guest-exec that timed out, or an agent silent for longer, makes the host
unreachable with the reason (the run's watchdog then reports the VM).
"""

DOCUMENTATION = """
---
name: lab_guest_agent
short_description: libvirt_qemu (guest agent) connection that rides out a slow agent
description:
  - community.libvirt.libvirt_qemu with retries of agent calls that timed out or were refused
    while libvirt waited for a slow agent.
options:
  remote_addr:
    description: Virtual machine name.
    default: inventory_hostname
    vars:
      - name: ansible_host
      - name: inventory_hostname
  executable:
    description: Shell to use for execution inside the VM.
    default: /bin/sh
    vars:
      - name: ansible_shell_type
  virt_uri:
    description: Libvirt URI of the VM's hypervisor.
    default: qemu:///system
    vars:
      - name: ansible_libvirt_uri
  agent_patience:
    description: Seconds an agent call may be retried while the agent is slow or unavailable.
    default: 60
    type: int
    vars:
      - name: lab_agent_patience
"""

import json
import time

import libvirt
import libvirt_qemu as _agent
from ansible.errors import AnsibleConnectionFailure
from ansible_collections.community.libvirt.plugins.connection import libvirt_qemu as base

# libvirt's messages while the agent is slow: not sent at all, or no answer in time
REFUSED = "not available for now"
SLOW = ("not responding", "timed out", "Timed out")


class _PatientAgent:
    """Stands in for the libvirt_qemu binding inside the collection's plugin."""

    patience = 60

    def __getattr__(self, name):
        return getattr(_agent, name)

    def qemuAgentCommand(self, domain, cmd, timeout, flags):
        deadline = time.monotonic() + self.patience
        is_exec = json.loads(cmd).get("execute") == "guest-exec"
        while True:
            try:
                return _agent.qemuAgentCommand(domain, cmd, timeout, flags)
            except libvirt.libvirtError as err:
                msg = str(err)
                refused = REFUSED in msg
                if not refused and not any(s in msg for s in SLOW):
                    raise
                if (is_exec and not refused) or time.monotonic() > deadline:
                    why = ("a command may have started" if is_exec and not refused
                           else f"no answer for {self.patience} s")
                    raise AnsibleConnectionFailure(f"guest agent of {domain.name()}: {msg} ({why})") from err
                time.sleep(1)


_PATIENT = _PatientAgent()
base.libvirt_qemu = _PATIENT
# libvirt prints every error to stderr by default, the retried ones too;
# errors that matter reach Ansible as exceptions all the same
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


class Connection(base.Connection):
    """community.libvirt.libvirt_qemu whose agent calls ride out a slow agent."""

    transport = "lab_guest_agent"

    def _connect(self):
        _PATIENT.patience = int(self.get_option("agent_patience"))
        return super()._connect()
