"""The guest connection plugin rides out a slow guest agent without ever
running a command twice (no VM: the libvirt binding is stood in for)."""

import json
import sys

import libvirt
import pytest
from ansible.errors import AnsibleConnectionFailure

from conftest import REPO

sys.path.insert(0, str(REPO / "lab/plugins/connection"))
import lab_guest_agent  # noqa: E402


class Dom:
    def name(self):
        return "vm-1"


def agent_answers(monkeypatch, errors):
    """The binding raises the given messages in turn, then answers."""
    calls = []

    def fake(domain, cmd, timeout, flags):
        calls.append(json.loads(cmd)["execute"])
        if len(calls) <= len(errors):
            raise libvirt.libvirtError(errors[len(calls) - 1])
        return '{"return": {}}'
    monkeypatch.setattr(lab_guest_agent._agent, "qemuAgentCommand", fake)
    monkeypatch.setattr(lab_guest_agent.time, "sleep", lambda s: None)
    return calls


def call(execute, patience=60):
    lab_guest_agent._PATIENT.patience = patience
    return lab_guest_agent.base.libvirt_qemu.qemuAgentCommand(Dom(), json.dumps({"execute": execute}), 5, 0)


def test_a_poll_is_retried_while_the_agent_is_slow(monkeypatch):
    calls = agent_answers(monkeypatch, ["Guest agent is not responding: Guest agent not available for now",
                                        "Guest agent is not responding: QEMU guest agent is not connected"
                                        " ... timed out"])
    assert call("guest-exec-status") == '{"return": {}}'
    assert calls == ["guest-exec-status"] * 3


def test_an_exec_libvirt_refused_to_send_is_retried(monkeypatch):
    calls = agent_answers(monkeypatch, ["Guest agent is not responding: Guest agent not available for now"])
    call("guest-exec")
    assert calls == ["guest-exec", "guest-exec"]


def test_an_exec_that_timed_out_is_never_sent_again(monkeypatch):
    calls = agent_answers(monkeypatch, ["Guest agent is not responding: Timed out during operation"])
    with pytest.raises(AnsibleConnectionFailure, match="may have started"):
        call("guest-exec")
    assert calls == ["guest-exec"]


def test_patience_runs_out(monkeypatch):
    agent_answers(monkeypatch, ["Guest agent not available for now"] * 1000)
    monkeypatch.setattr(lab_guest_agent.time, "monotonic", iter(range(0, 10000, 10)).__next__)
    with pytest.raises(AnsibleConnectionFailure, match="no answer for 30 s"):
        call("guest-file-read", patience=30)


def test_other_errors_are_not_retried(monkeypatch):
    calls = agent_answers(monkeypatch, ["Domain not found: no domain with matching name"])
    with pytest.raises(libvirt.libvirtError):
        call("guest-exec-status")
    assert calls == ["guest-exec-status"]
