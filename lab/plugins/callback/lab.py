"""The lab's stdout callback: Ansible's default output, except that a task
retried until done whose output starts with "progress: " (the build phases'
lab/tools/build-progress) prints that line instead of "FAILED - RETRYING"."""

from ansible.plugins.callback.default import CallbackModule as DefaultCallback

DOCUMENTATION = """
    name: lab
    type: stdout
    short_description: default output plus progress lines of long phases
    description:
      - Ansible's default stdout callback; retries of a progress task print its progress line.
    extends_documentation_fragment:
      - default_callback
      - result_format_callback
    requirements:
      - set as stdout callback in ansible.cfg
"""


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "lab"

    def v2_runner_retry(self, result):
        out = str(result._result.get("stdout", ""))
        if out.startswith("progress: "):
            self._display.display(f"[{result._host.get_name()}] {out[len('progress: '):]}")
            return
        super().v2_runner_retry(result)

    def v2_runner_on_ok(self, result):
        out = str(result._result.get("stdout", ""))
        if out.startswith("progress: "):
            self._display.display(f"[{result._host.get_name()}] {out[len('progress: '):]}")
        super().v2_runner_on_ok(result)
