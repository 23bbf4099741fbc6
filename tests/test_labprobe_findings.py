"""labprobe's kernel log gate (lab/tools/labprobe/findings.c) on the kernel's
own report lines, without a VM: each pattern of its table finds the line the
kernel prints (the format strings of Linux 6.1, filled in with realistic
values) as exactly one finding of its kind, the lines around a report and
look-alike lines (boot notices, a device's message, user space writing to
the log) are no finding, and records lost from the log are reported.

Only `labprobe findings` runs here, and it reads files of records through
LABPROBE_KMSG, never this host's log (a path that does not exist otherwise).
Where the kernel prints each line: kernel/locking/lockdep.c,
kernel/sched/core.c (__might_resched, __schedule_bug), mm/kasan/report.c,
lib/ubsan.c, kernel/hung_task.c, kernel/rcu/tree_stall.h, tree_exp.h,
tasks.h (pr_fmt "rcu: " from tree.c), kernel/watchdog.c (pr_fmt
"watchdog: "), kernel/watchdog_hld.c ("NMI watchdog: "),
kernel/irq/spurious.c, lib/list_debug.c, lib/refcount.c, lib/bug.c,
arch/x86/mm/fault.c, arch/x86/kernel/traps.c and dumpstack.c (die()'s
"%s: %04lx [#%d]..." header), kernel/panic.c."""

import json
import os
import re

import pytest

from conftest import CRASHES, REPO, run

FINDINGS_C = REPO / "lab/tools/labprobe/findings.c"
TAINT = "Not tainted 6.1.0-labtest #1"


def record(seq, message, level=4):
    """One /dev/kmsg record: "level,seq,usec,flags;message" (the kernel
    escapes a tab in a message as \\x09)."""
    return f"{level},{seq},{seq * 1000},-;{message}\n"


def log(*messages, first=1):
    """Records of consecutive sequence numbers from `first`."""
    return "".join(record(first + i, m) for i, m in enumerate(messages))


def findings(labprobe, tmp_path, text, *args):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(text)
    env = dict(os.environ, LABPROBE_KMSG=str(kmsg))
    r = run([labprobe, "findings", *args], env=env, timeout=30)
    assert r.returncode not in CRASHES, (r.returncode, r.stderr)
    try:
        rep = json.loads(r.stdout)
    except ValueError:
        pytest.fail(f"no JSON report (exit {r.returncode}): {r.stdout!r} {r.stderr!r}")
    assert "error" not in rep, rep
    return r.returncode, rep


BOOT = ["Linux version 6.1.0-labtest (root@lab) (gcc (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC",
        "pcieport 0000:00:1c.0: pciehp: Slot #1 AttnBtn+ PwrCtrl+ MRL- AttnInd+ PwrInd+ HotPlug+ Surprise+ "
        "Interlock- NoCompl- IbPresDis- LLActRep+"]
AFTER = "nvme nvme0: 4/0/0 default/read/poll queues"

# (kind, the kernel's line): every pattern of findings.c's table has at
# least one (test_every_pattern_has_a_real_line checks)
REAL = [
    # lockdep: each report's header
    ("lockdep", "WARNING: possible circular locking dependency detected"),
    ("lockdep", "WARNING: possible recursive locking detected"),
    ("lockdep", "WARNING: inconsistent lock state"),
    ("lockdep", "WARNING: possible irq lock inversion dependency detected"),
    ("lockdep", "WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected"),
    ("lockdep", "WARNING: SOFTIRQ-safe -> SOFTIRQ-unsafe lock order detected"),
    ("lockdep", "WARNING: bad unlock balance detected!"),
    ("lockdep", "WARNING: held lock freed!"),
    ("lockdep", "WARNING: irq/24-pciehp/123 still has locks held!"),
    ("lockdep", "WARNING: lock held when returning to user space!"),
    ("lockdep", "WARNING: suspicious RCU usage"),
    ("lockdep", "WARNING: Nested lock was not taken"),
    ("lockdep", "WARNING: chain_key collision"),
    ("lockdep", "WARNING: bad contention detected!"),
    ("lockdep", "[ BUG: Invalid wait context ]"),
    ("lockdep", "INFO: trying to register non-static key."),
    ("sleep-in-atomic", "BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580"),
    ("sleep-in-atomic", "BUG: scheduling while atomic: irq/24-pciehp/123/0x00000002"),
    ("kasan", "BUG: KASAN: slab-out-of-bounds in pcie_do_write_cmd+0x5e/0x1d0"),
    ("kasan", "BUG: KASAN: use-after-free in pciehp_ist+0x1c4/0x2a0"),
    ("ubsan", "UBSAN: array-index-out-of-bounds in drivers/pci/hotplug/pciehp_hpc.c:612:23"),
    ("ubsan", "UBSAN: shift-out-of-bounds in drivers/pci/pcie/aer.c:1024:17"),
    ("hung-task", "INFO: task irq/24-pciehp:123 blocked for more than 10 seconds."),
    ("hung-task", "INFO: task kworker/u8:2:57 blocked for more than 120 seconds."),
    ("rcu-stall", "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:"),
    ("rcu-stall", "rcu: INFO: rcu_sched detected stalls on CPUs/tasks:"),
    ("rcu-stall", "rcu: INFO: rcu_preempt self-detected stall on CPU"),
    ("rcu-stall", "rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-.... } "
                  "21004 jiffies s: 1237 root: 0x2/."),
    ("rcu-stall", "INFO: rcu_tasks detected stalls on tasks:"),
    ("rcu-stall", "INFO: rcu_tasks_trace detected stalls on tasks:"),
    ("lockup", "watchdog: BUG: soft lockup - CPU#2 stuck for 26s! [irq/24-pciehp:123]"),
    ("lockup", "NMI watchdog: Watchdog detected hard LOCKUP on cpu 1"),
    ("spurious-irq", 'irq 24: nobody cared (try booting with the "irqpoll" option)'),
    ("spurious-irq", "irq event 24: bogus return value 3"),
    ("spurious-irq", "Disabling IRQ #24"),
    ("list-corruption", "list_add corruption. next->prev should be prev (ffff888003a1c1d8), but was "
                        "ffff888003a1c0a8. (next=ffff888003a1c0a8)."),
    ("list-corruption", "list_del corruption, ffff888003a1c1d8->next is LIST_POISON1 (dead000000000100)"),
    ("list-corruption", "list_del corruption. prev->next should be ffff888003a1c1d8, but was ffff888003a1c0a8. "
                        "(prev=ffff888003a1c0a8)"),
    ("refcount", "refcount_t: underflow; use-after-free."),
    ("refcount", "refcount_t: addition on 0; use-after-free."),
    ("bug", "kernel BUG at drivers/pci/hotplug/pciehp_ctrl.c:312!"),
    ("bug", "Kernel BUG at pciehp_ist+0x1c4/0x2a0 [verbose debug info unavailable]"),
    ("bug", "BUG: kernel NULL pointer dereference, address: 0000000000000040"),
    ("bug", "BUG: unable to handle page fault for address: ffffc90000a4c010"),
    ("bug", "BUG: workqueue lockup - pool cpus=1 node=0 flags=0x0 nice=0 stuck for 33s!"),
    ("warning", "WARNING: CPU: 0 PID: 1 at drivers/pci/x.c:10 f+0x1/0x2"),
    ("warning", "WARNING: CPU: 1 PID: 123 at kernel/locking/lockdep.c:5231 lock_release+0x2a1/0x2c0"),
    ("oops", "Oops: 0000 [#1] PREEMPT SMP NOPTI"),
    ("oops", "general protection fault, probably for non-canonical address 0xdead000000000122: "
             "0000 [#1] PREEMPT SMP NOPTI"),
    ("oops", "segment-related general protection fault: 0000 [#1] PREEMPT SMP NOPTI"),
    ("oops", "invalid opcode: 0000 [#1] PREEMPT SMP NOPTI"),
    ("oops", "divide error: 0000 [#1] PREEMPT SMP NOPTI"),
    ("panic", "Kernel panic - not syncing: Fatal exception"),
    ("pciehp-state", "pcieport 0000:00:1c.0: pciehp: Slot(1): Already disabled"),
    ("pciehp-state", "pcieport 0000:00:1c.0: pciehp: Slot(1): Already enabled"),
    # shpchp's message (drivers/pci/hotplug/shpchp_pci.c); pciehp's is a
    # debug message, "skipping hot-add"
    ("pciehp-state", "shpchp 0000:00:03.0: Device 0000:01:00.0 already exists at 0000:01:00, cannot hot-add"),
    ("pciehp-state", "pcieport 0000:00:1c.0: pciehp: Timeout on hotplug command 0x13f1 (issued 1016 msec ago)"),
]

# lines like a family's report that are not one: boot notices, the lines
# inside a report (the report's header is its one finding), user space
KIN = [
    ("warning", "RETBleed: WARNING: Spectre v2 mitigation leaves CPU vulnerable to RETBleed attacks, "
                "data leaks possible!"),
    ("warning", "Speculative Return Stack Overflow: WARNING: See https://kernel.org/doc/html/latest/"
                "admin-guide/hw-vuln/srso.html for mitigation options."),
    ("warning", "------------[ cut here ]------------"),
    ("warning", "---[ end trace 0000000000000000 ]---"),
    ("warning", "CPU: 1 PID: 123 Comm: irq/24-pciehp Tainted: G        W          6.1.0-labtest #1"),
    ("lockdep", "Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar"),
    ("lockdep", "... MAX_LOCKDEP_KEYS:        8192"),
    ("lockdep", "INFO: lockdep is turned off."),
    ("lockdep", "Showing all locks held in the system:"),
    ("bug", "ACPI: [Firmware Bug]: BIOS _OSI(Linux) query ignored"),
    ("bug", "#PF: supervisor read access in kernel mode"),
    ("sleep-in-atomic", "in_atomic(): 1, irqs_disabled(): 0, non_block: 0, pid: 123, name: irq/24-pciehp"),
    ("sleep-in-atomic", "preempt_count: 1, expected: 0"),
    ("kasan", "kasan: KernelAddressSanitizer initialized"),
    ("kasan", "Memory state around the buggy address:"),
    ("ubsan", "================================================================================"),
    ("ubsan", "index 8 is out of range for type 'u32 [8]'"),
    ("hung-task", '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.'),
    ("hung-task", "task:irq/24-pciehp   state:D stack:0     pid:123   ppid:2      flags:0x00004000"),
    ("rcu-stall", "rcu: Hierarchical RCU implementation."),
    ("rcu-stall", "\\x09RCU CPU stall warnings timeout set to 21 (rcu_cpu_stall_timeout)."),
    ("rcu-stall", "rcu: \\x09(detected by 2, t=21002 jiffies, g=1361, q=7 ncpus=4)"),
    ("rcu-stall", "rcu: rcu_preempt kthread starved for 21004 jiffies! g1361 f0x0 RCU_GP_WAIT_FQS(5) "
                  "->state=0x0 ->cpu=1"),
    ("lockup", "NMI watchdog: Enabled. Permanently consumes one hw-PMU counter."),
    ("lockup", "watchdog: Disabling watchdog on nohz_full cores by default"),
    ("spurious-irq", "pcieport 0000:00:1c.0: PME: Signaling with IRQ 24"),
    ("spurious-irq", "pcieport 0000:00:1c.0: pciehp: Slot(1): Link Down"),
    ("spurious-irq", "handlers:"),
    ("spurious-irq", "[<00000000a1b2c3d4>] pcie_pme_irq"),
    ("spurious-irq", "Misrouted IRQ fixup support enabled."),
    # a user space program's crash, which the kernel logs: not a kernel oops
    ("oops", "traps: fio[1234] general protection fault ip:7f3c1a2b4c5d sp:7ffd1b2c3d40 error:0 "
             "in libc.so.6[7f3c1a228000+155000]"),
    ("oops", "traps: a.out[77] trap invalid opcode ip:401126 sp:7ffc8d0a1e30 error:0 in a.out[401000+1000]"),
    ("oops", "traps: a.out[77] trap divide error ip:401126 sp:7ffc8d0a1e30 error:0 in a.out[401000+1000]"),
    ("panic", "---[ end Kernel panic - not syncing: Fatal exception ]---"),
    ("panic", "Kernel Offset: disabled"),
]

# whole reports as the kernel prints them, record by record: the findings
# they give, in order
REPORTS = {
    "warn": (["------------[ cut here ]------------",
              "WARNING: CPU: 1 PID: 123 at drivers/pci/hotplug/pciehp_hpc.c:612 pciehp_ist+0x1c4/0x2a0",
              "Modules linked in:",
              f"CPU: 1 PID: 123 Comm: irq/24-pciehp {TAINT}",
              "Hardware name: QEMU Standard PC (Q35 + ICH9, 2009), BIOS 1.16.2-debian-1.16.2-1 04/01/2014",
              "RIP: 0010:pciehp_ist+0x1c4/0x2a0",
              "Call Trace:", " <TASK>", " irq_thread_fn+0x20/0x60", " </TASK>",
              "---[ end trace 0000000000000000 ]---"], ["warning"]),
    "lockdep": (["", "======================================================",
                 "WARNING: possible circular locking dependency detected",
                 "6.1.0-labtest #1 Not tainted",
                 "------------------------------------------------------",
                 "irq/24-pciehp/123 is trying to acquire lock:",
                 "ffff888003a1c1d8 (&ctrl->reset_lock){++++}-{3:3}, at: pciehp_ist+0x9c/0x2a0",
                 "", "but task is already holding lock:",
                 "ffffffff82a4b2c8 (pci_rescan_remove_lock){+.+.}-{3:3}, at: pciehp_unconfigure_device+0x2e/0x150",
                 "", "which lock already depends on the new lock.", "",
                 "the existing dependency chain (in reverse order) is:",
                 "-> #1 (pci_rescan_remove_lock){+.+.}-{3:3}:", "       __mutex_lock+0x8a/0x8f0",
                 "other info that might help us debug this:", " Possible unsafe locking scenario:",
                 "       CPU0                    CPU1", "       ----                    ----",
                 "  lock(pci_rescan_remove_lock);", "", " *** DEADLOCK ***", "",
                 "2 locks held by irq/24-pciehp/123:", "stack backtrace:",
                 f"CPU: 1 PID: 123 Comm: irq/24-pciehp {TAINT}", "Call Trace:"], ["lockdep"]),
    "might-sleep": (["BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580",
                     "in_atomic(): 1, irqs_disabled(): 1, non_block: 0, pid: 123, name: irq/24-pciehp",
                     "preempt_count: 1, expected: 0", "RCU nest depth: 0, expected: 0",
                     f"CPU: 1 PID: 123 Comm: irq/24-pciehp {TAINT}", "Call Trace:"], ["sleep-in-atomic"]),
    "ubsan": (["=" * 80,
               "UBSAN: array-index-out-of-bounds in drivers/pci/hotplug/pciehp_hpc.c:612:23",
               "index 8 is out of range for type 'u32 [8]'",
               f"CPU: 1 PID: 123 Comm: irq/24-pciehp {TAINT}", "Call Trace:", " <TASK>", " </TASK>",
               "=" * 80], ["ubsan"]),
    "hung-task": (["INFO: task irq/24-pciehp:123 blocked for more than 10 seconds.",
                   "      Not tainted 6.1.0-labtest #1",
                   '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
                   "task:irq/24-pciehp   state:D stack:0     pid:123   ppid:2      flags:0x00004000",
                   "Call Trace:", " <TASK>", " __schedule+0x2f0/0x950", " </TASK>"], ["hung-task"]),
    "rcu-stall": (["rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
                   "rcu: \\x09Tasks blocked on level-0 rcu_node (CPUs 0-3): P123/1:b..l",
                   "rcu: \\x09(detected by 2, t=21002 jiffies, g=1361, q=7 ncpus=4)",
                   "task:irq/24-pciehp   state:R  running task     stack:0     pid:123   ppid:2      "
                   "flags:0x00004008",
                   "rcu: rcu_preempt kthread starved for 21004 jiffies! g1361 f0x0 RCU_GP_WAIT_FQS(5) "
                   "->state=0x0 ->cpu=1",
                   "rcu: \\x09Unless rcu_preempt kthread gets sufficient CPU time, OOM is now expected behavior.",
                   "rcu: RCU grace-period kthread stack dump:"], ["rcu-stall"]),
    "soft-lockup": (["watchdog: BUG: soft lockup - CPU#2 stuck for 26s! [irq/24-pciehp:123]",
                     "Modules linked in:",
                     "CPU: 2 PID: 123 Comm: irq/24-pciehp Tainted: G             L     6.1.0-labtest #1",
                     "RIP: 0010:pciehp_ist+0x1c4/0x2a0"], ["lockup"]),
    # two records of one event, each a finding
    "nobody-cared": (['irq 24: nobody cared (try booting with the "irqpoll" option)',
                      "CPU: 0 PID: 0 Comm: swapper/0 Not tainted 6.1.0-labtest #1", "Call Trace:",
                      "handlers:", "[<00000000a1b2c3d4>] pcie_pme_irq", "Disabling IRQ #24"],
                     ["spurious-irq", "spurious-irq"]),
    "null-deref": (["BUG: kernel NULL pointer dereference, address: 0000000000000040",
                    "#PF: supervisor read access in kernel mode", "#PF: error_code(0x0000) - not-present page",
                    "PGD 0 P4D 0 ", "Oops: 0000 [#1] PREEMPT SMP NOPTI",
                    f"CPU: 1 PID: 123 Comm: irq/24-pciehp {TAINT}", "RIP: 0010:pciehp_ist+0x1c4/0x2a0",
                    "---[ end trace 0000000000000000 ]---", "Kernel panic - not syncing: Fatal exception",
                    "Kernel Offset: disabled", "---[ end Kernel panic - not syncing: Fatal exception ]---"],
                   ["bug", "oops", "panic"]),
    "bug-on": (["------------[ cut here ]------------", "kernel BUG at drivers/pci/hotplug/pciehp_ctrl.c:312!",
                "invalid opcode: 0000 [#1] PREEMPT SMP NOPTI", f"CPU: 1 PID: 123 Comm: irq/24-pciehp {TAINT}"],
               ["bug", "oops"]),
    "refcount": (["------------[ cut here ]------------", "refcount_t: underflow; use-after-free.",
                  "WARNING: CPU: 1 PID: 123 at lib/refcount.c:28 refcount_warn_saturate+0xba/0x110"],
                 ["refcount", "warning"]),
}


def c_patterns():
    """findings.c's table: [(needle, kind)], in order."""
    text = FINDINGS_C.read_text()
    table = re.search(r"\} patterns\[\] = \{\n(.*?)\n\};", text, re.S).group(1)
    rows = re.findall(r'\{ "((?:[^"\\]|\\.)*)", "([a-z-]+)" \},', table)
    assert rows and len(rows) == table.count("{ \""), table
    return [(needle.replace('\\"', '"'), kind) for needle, kind in rows]


def needle_regex(needle):
    """The table's matching rule: '^' opens the message, '*' any run."""
    anchored = needle.startswith("^")
    body = ".*?".join(re.escape(part) for part in needle.lstrip("^").split("*"))
    return re.compile(body if anchored else ".*?" + body)


@pytest.mark.parametrize("kind, line", REAL, ids=[f"{k}:{line[:50]}" for k, line in REAL])
def test_real_line_is_one_finding(labprobe, tmp_path, kind, line):
    """The kernel's line in a log is one finding, of its kind, with the line
    itself and its context."""
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, line, AFTER), "--context", "1")
    assert rc == 1 and rep["ok"] is False, rep
    [f] = rep["findings"]
    assert (f["kind"], f["line"]) == (kind, line)
    assert len(f["context"]) == 3 and f["context"][1].endswith(line) and f["context"][2].endswith(AFTER)


@pytest.mark.parametrize("family, line", KIN, ids=[f"{k}:{line[:50]}" for k, line in KIN])
def test_look_alike_is_no_finding(labprobe, tmp_path, family, line):
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, line, AFTER))
    assert rc == 0 and rep["ok"] is True and rep["findings"] == [], rep


ANCHORED = [(k, line) for k, line in REAL if k != "pciehp-state"]


@pytest.mark.parametrize("prefix", ["labprobe: ", "nvme nvme0: "])
@pytest.mark.parametrize("kind, line", ANCHORED, ids=[f"{k}:{line[:50]}" for k, line in ANCHORED])
def test_report_text_inside_another_message_is_no_finding(labprobe, tmp_path, prefix, kind, line):
    """Every pattern but pciehp's states opens the message: the same words
    inside a device's message, or in a line user space wrote to the log
    (the lab's scenarios write "labprobe: ..." marks there), are no kernel
    report."""
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, prefix + line, AFTER))
    assert rc == 0 and rep["findings"] == [], rep


@pytest.mark.parametrize("name", REPORTS)
def test_whole_report(labprobe, tmp_path, name):
    """A report as the kernel prints it, record by record: its header is
    the finding, the lines inside it (stack, registers, "cut here", the end
    marker) are not findings of their own."""
    lines, kinds = REPORTS[name]
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *lines, AFTER), "--context", "0")
    assert rc == 1, rep
    assert [f["kind"] for f in rep["findings"]] == kinds, rep["findings"]
    assert all(f["line"] in lines for f in rep["findings"])


def test_reports_in_log_order_after_since_seq(labprobe, tmp_path):
    """Several reports: one finding each, in log order; --since-seq leaves
    out those up to that record."""
    text = log(*BOOT, "WARNING: possible recursive locking detected", AFTER,
               "INFO: task irq/24-pciehp:123 blocked for more than 10 seconds.",
               "rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-.... } "
               "21004 jiffies s: 1237 root: 0x2/.", "Disabling IRQ #24")
    rc, rep = findings(labprobe, tmp_path, text)
    assert rc == 1 and [f["kind"] for f in rep["findings"]] == ["lockdep", "hung-task", "rcu-stall",
                                                                 "spurious-irq"], rep
    rc, rep = findings(labprobe, tmp_path, text, "--since-seq", "5")
    assert rc == 1 and [f["kind"] for f in rep["findings"]] == ["rcu-stall", "spurious-irq"], rep


def test_records_lost_are_reported(labprobe, tmp_path):
    """Records lost from the log (the ring overwrote them under the reader:
    a gap in the sequence numbers) are counted in kmsg_overrun and make a
    kmsg-gap finding: a scan of a log that is not whole is no clean result.
    Both gaps count, and a report after a gap is still found."""
    clean = log("a", "b") + log("c", first=5) + log("d", "e", first=9)
    rc, rep = findings(labprobe, tmp_path, clean)
    assert rep["kmsg_overrun"] == 5 and rep["kmsg_last_seq"] == 10, rep
    assert rc == 1 and [f["kind"] for f in rep["findings"]] == ["kmsg-gap"], rep
    assert "5 record(s)" in rep["findings"][0]["line"]

    rc, rep = findings(labprobe, tmp_path, log("a", "b") + log("UBSAN: shift-out-of-bounds in "
                                                             "drivers/pci/pcie/aer.c:1024:17", first=7))
    assert rc == 1 and rep["kmsg_overrun"] == 4, rep
    assert [f["kind"] for f in rep["findings"]] == ["kmsg-gap", "ubsan"]

    rc, rep = findings(labprobe, tmp_path, log("a", "b", "c"))
    assert rc == 0 and rep["kmsg_overrun"] == 0 and rep["findings"] == [], rep


def test_records_lost_before_the_window_was_read_are_a_finding(labprobe, tmp_path):
    """--since-seq S, and the oldest record the ring still holds is past
    S + 1: the window's first records are gone. A gap before the window
    does not count."""
    rc, rep = findings(labprobe, tmp_path, log("x", "y", first=20), "--since-seq", "10")
    assert rc == 1 and [f["kind"] for f in rep["findings"]] == ["kmsg-gap"], rep
    assert "9 record(s) after seq 10" in rep["findings"][0]["line"]
    rc, rep = findings(labprobe, tmp_path, log("a", first=1) + log("x", "y", first=20), "--since-seq", "20")
    assert rc == 0 and rep["findings"] == [], rep
    rc, rep = findings(labprobe, tmp_path, log("x", "y", first=11), "--since-seq", "10")
    assert rc == 0 and rep["findings"] == [], rep


def test_every_pattern_has_a_real_line():
    """Each pattern of findings.c's table finds at least one of the real
    lines above, of its kind, first: no pattern without a test, none that
    an earlier, broader pattern hides (the lockdep reports used to be taken
    by "^WARNING:"). The matching rule is findings.c's, in Python."""
    table = [(needle, kind, needle_regex(needle)) for needle, kind in c_patterns()]
    first = {}
    for kind, line in REAL:
        hit = next(((needle, k) for needle, k, rx in table if rx.match(line)), None)
        assert hit and hit[1] == kind, (line, hit)
        first.setdefault(hit[0], line)
    untested = [needle for needle, kind, rx in table if needle not in first]
    assert not untested, untested
    for kind, line in KIN:
        assert not any(rx.match(line) for needle, k, rx in table), line


# --- the debug variant's checks (kernel/config/debug.config) -------------------
# Each report as Linux 6.1 prints it, record by record (kernel/locking/lockdep.c:
# print_circular_bug_header, print_deadlock_bug, print_usage_bug,
# print_irq_inversion_bug, print_lock_invalid_wait_context,
# print_unlock_imbalance_bug, lockdep_rcu_suspicious, assign_lock_key;
# kernel/sched/core.c: __might_resched, __schedule_bug; mm/kasan/report.c),
# with the lab's own locks and functions filled in. Each is one finding of
# its kind, on its header; the report's other lines -- the same words
# (locks, "usage", "atomic", "KASAN", "DEADLOCK"), none of them a report of
# its own -- are no finding, alone or together.

IDENT = "6.1.192-lab-debug #1 Not tainted"
CPU_LINE = "CPU: 1 PID: 123 Comm: irq/24-pciehp Not tainted 6.1.192-lab-debug #1"
RESCAN_LOCK = "ffffffff82a4b2c8 (pci_rescan_remove_lock){+.+.}-{3:3}, at: "

DEBUG_REPORTS = {
    "circular": ("lockdep", "WARNING: possible circular locking dependency detected", [
        "", "======================================================", None, IDENT,
        "------------------------------------------------------",
        "irq/24-pciehp/123 is trying to acquire lock:",
        "ffff888003a1c1d8 (&ctrl->reset_lock){++++}-{3:3}, at: pciehp_ist+0x9c/0x2a0", "",
        "but task is already holding lock:", RESCAN_LOCK + "pciehp_unconfigure_device+0x2e/0x150", "",
        "which lock already depends on the new lock.", "", "the existing dependency chain (in reverse order) is:",
        "-> #1 (pci_rescan_remove_lock){+.+.}-{3:3}:", "       __mutex_lock+0x8a/0x8f0",
        "other info that might help us debug this:", " Possible unsafe locking scenario:",
        "  lock(pci_rescan_remove_lock);", "", " *** DEADLOCK ***", "",
        "2 locks held by irq/24-pciehp/123:", "stack backtrace:", CPU_LINE, "Call Trace:"]),
    "recursive": ("lockdep", "WARNING: possible recursive locking detected", [
        "", "============================================", None, IDENT,
        "--------------------------------------------", "kworker/u4:3/77 is trying to acquire lock:",
        RESCAN_LOCK + "pci_stop_and_remove_bus_device_locked+0x15/0x30", "", "but task is already holding lock:",
        RESCAN_LOCK + "rescan_store+0x4e/0x90", "", "other info that might help us debug this:",
        " Possible unsafe locking scenario:", "       CPU0", "       ----", "  lock(pci_rescan_remove_lock);",
        "  lock(pci_rescan_remove_lock);", "", " *** DEADLOCK ***", "",
        " May be due to missing lock nesting notation", "", "4 locks held by kworker/u4:3/77:",
        "stack backtrace:"]),
    "inconsistent": ("lockdep", "WARNING: inconsistent lock state", [
        "", "================================", None, IDENT, "--------------------------------",
        "inconsistent {HARDIRQ-ON-W} -> {IN-HARDIRQ-W} usage.",
        "swapper/0/0 [HC1[1]:SC0[0]:HE0:SE1] takes:",
        "ffff888003a1c1d8 (&ctrl->lock){?.+.}-{2:2}, at: pciehp_isr+0x5a/0x240",
        "{HARDIRQ-ON-W} state was registered at:", "irq event stamp: 12345",
        "hardirqs last  enabled at (12344): [<ffffffff81a4c2b1>] _raw_spin_unlock_irq+0x1f/0x40",
        "other info that might help us debug this:", " Possible unsafe locking scenario:", "",
        " *** DEADLOCK ***", "", "no locks held by swapper/0/0.", "stack backtrace:"]),
    "irq-inversion": ("lockdep", "WARNING: possible irq lock inversion dependency detected", [
        "", "========================================================", None, IDENT,
        "--------------------------------------------------------",
        "irq/24-pciehp/123 just changed the state of lock:",
        "ffff888003a1c1d8 (&ctrl->lock){-...}-{2:2}, at: pciehp_isr+0x5a/0x240",
        "but this lock took another, HARDIRQ-unsafe lock in the past:", " (&dev->mutex){+.+.}-{3:3}", "",
        "", "and interrupts could create inverse lock ordering between them.", "",
        "other info that might help us debug this:", " *** DEADLOCK ***", "stack backtrace:"]),
    "wait-context": ("lockdep", "[ BUG: Invalid wait context ]", [
        "", "=============================", None, IDENT, "-----------------------------",
        "irq/24-pciehp/123 is trying to lock:", RESCAN_LOCK + "pciehp_unconfigure_device+0x2e/0x150",
        "other info that might help us debug this:", "context-{4:4}", "1 lock held by irq/24-pciehp/123:",
        "stack backtrace:", CPU_LINE]),
    "unlock-balance": ("lockdep", "WARNING: bad unlock balance detected!", [
        "", "=====================================", None, IDENT, "-------------------------------------",
        "irq/24-pciehp/123 is trying to release lock (pci_rescan_remove_lock) at:",
        "[<ffffffff8156a2c3>] pci_unlock_rescan_remove+0x13/0x20", "but there are no more locks to release!",
        "", "other info that might help us debug this:", "no locks held by irq/24-pciehp/123.",
        "stack backtrace:"]),
    "rcu": ("lockdep", "WARNING: suspicious RCU usage", [
        "", "=============================", None, IDENT, "-----------------------------",
        "drivers/pci/hotplug/pciehp_core.c:312 suspicious rcu_dereference_check() usage!", "",
        "other info that might help us debug this:", "", "", "rcu_scheduler_active = 2, debug_locks = 1",
        "1 lock held by irq/24-pciehp/123:", "stack backtrace:"]),
    "non-static-key": ("lockdep", "INFO: trying to register non-static key.", [
        None, "The code is fine but needs lockdep annotation, or maybe",
        "you didn't initialize this object before use?", "turning off the locking correctness validator.",
        CPU_LINE, "Call Trace:"]),
    "might-sleep": ("sleep-in-atomic",
                    "BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580", [
        None, "in_atomic(): 1, irqs_disabled(): 1, non_block: 0, pid: 123, name: irq/24-pciehp",
        "preempt_count: 1, expected: 0", "RCU nest depth: 0, expected: 0",
        "1 lock held by irq/24-pciehp/123:", "irq event stamp: 12345", "Preemption disabled at:",
        "[<ffffffff81a4c2b1>] pciehp_isr+0x5a/0x240", CPU_LINE, "Call Trace:"]),
    "scheduling-while-atomic": ("sleep-in-atomic", "BUG: scheduling while atomic: irq/24-pciehp/123/0x00000002", [
        None, "2 locks held by irq/24-pciehp/123:", "Modules linked in:", "Preemption disabled at:",
        "[<ffffffff81a4c2b1>] pciehp_isr+0x5a/0x240", CPU_LINE, "Call Trace:"]),
    "kasan": ("kasan", "BUG: KASAN: use-after-free in pci_dev_set_disconnected+0x1c/0x60", [
        "==================================================================", None,
        "Read of size 4 at addr ffff888004a1c0d8 by task irq/24-pciehp/123", "", CPU_LINE, "Call Trace:",
        " <TASK>", " dump_stack_lvl+0x5b/0x77", " kasan_report+0xb6/0xe0", " </TASK>", "",
        "Allocated by task 1:", " kasan_save_stack+0x1e/0x40", "", "Freed by task 77:",
        "The buggy address belongs to the object at ffff888004a1c000",
        " which belongs to the cache kmalloc-4k of size 4096",
        "The buggy address is located 216 bytes inside of", "Memory state around the buggy address:",
        " ffff888004a1bf80: fc fc fc fc fc fc fc fc fc fc fc fc fc fc fc fc",
        ">ffff888004a1c080: fb fb fb fb fb fb fb fb fb fb fb fb fb fb fb fb",
        "                                                    ^",
        "==================================================================",
        "Disabling lock debugging due to kernel taint"]),
}


def debug_report(name):
    kind, header, lines = DEBUG_REPORTS[name]
    return kind, header, [header if line is None else line for line in lines]


@pytest.mark.parametrize("name", DEBUG_REPORTS)
def test_debug_kernel_report_is_one_finding_of_its_kind(labprobe, tmp_path, name):
    kind, header, lines = debug_report(name)
    assert header in lines
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *lines, AFTER), "--context", "0")
    assert rc == 1, rep
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [(kind, header)], rep["findings"]


@pytest.mark.parametrize("name", DEBUG_REPORTS)
def test_debug_kernel_report_without_its_header_is_no_finding(labprobe, tmp_path, name):
    """The lines of the report around its header, and the header's words in
    a line user space wrote to the log, are no finding."""
    kind, header, lines = debug_report(name)
    rest = [line for line in lines if line != header]
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *rest, "labprobe: " + header, AFTER))
    assert rc == 0 and rep["findings"] == [], rep["findings"]


def test_every_debug_check_has_its_report():
    """The reports the debug kernel adds (lockdep, sleep-in-atomic, KASAN)
    each have a whole report above, whose header findings.c's table gives
    its kind first (not a catch-all's "bug" or "warning")."""
    table = [(needle_regex(needle), kind) for needle, kind in c_patterns()]
    headers = {}
    for name in DEBUG_REPORTS:
        kind, header, _ = debug_report(name)
        assert next(k for rx, k in table if rx.match(header)) == kind, header
        headers[header] = kind
    for want in ("circular locking", "recursive locking", "inconsistent lock state", "Invalid wait context",
                 "suspicious RCU usage", "sleeping function called from invalid context", "BUG: KASAN:",
                 "irq lock inversion", "bad unlock balance", "scheduling while atomic"):
        assert any(want in h for h in headers), want
