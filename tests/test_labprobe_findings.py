"""labprobe's kernel log gate (lab/tools/labprobe/findings.c) on the kernel's
own report lines, without a VM: each pattern of its table finds the line the
kernel prints (the format strings of Linux 6.1, filled in with realistic
values) as exactly one finding of its kind, the lines around a report and
look-alike lines (boot notices, a device's message, user space writing to
the log) are no finding, and records lost from the log are reported.

Whole reports, record by record, are one finding each: the OOM killer's
event (its "invoked oom-killer" header, hundreds of records of memory and
task state, its kill lines) one "oom" finding whose context keeps the kill
lines; a report's stack dump ("Call Trace:") no finding of its own, while a
stack dump no known report owns (dump_stack() from a caller no pattern
knows) is an "unknown-trace" finding named after the line before it; the
dumps sysrq prints on request are no finding.

Only `labprobe findings` runs here, and it reads files of records through
LABPROBE_KMSG, never this host's log (a path that does not exist otherwise).
Where the kernel prints each line: kernel/locking/lockdep.c,
kernel/sched/core.c (__might_resched, __schedule_bug), mm/kasan/report.c,
lib/ubsan.c, kernel/hung_task.c, kernel/rcu/tree_stall.h, tree_exp.h,
tasks.h (pr_fmt "rcu: " from tree.c), kernel/watchdog.c (pr_fmt
"watchdog: "), kernel/watchdog_hld.c ("NMI watchdog: "),
kernel/irq/spurious.c, lib/list_debug.c, lib/refcount.c, lib/bug.c,
arch/x86/mm/fault.c, arch/x86/kernel/traps.c and dumpstack.c (die()'s
"%s: %04lx [#%d]..." header, show_trace_log_lvl's "Call Trace:"),
kernel/panic.c, fs/sysfs/dir.c (sysfs_warn_dup, pr_fmt "sysfs: "),
mm/oom_kill.c (dump_header, __oom_kill_process, out_of_memory),
mm/page_alloc.c (warn_alloc, also for mm/vmalloc.c), lib/dump_stack.c
(dump_stack_print_info: "CPU: ..." -- "CPU: 1 UID: 0 PID: ..." in 6.12),
drivers/tty/sysrq.c (pr_fmt "sysrq: ")."""

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
    # fs/sysfs/dir.c sysfs_warn_dup: a device's directory, its bus link
    ("sysfs-dup", "sysfs: cannot create duplicate filename '/devices/pci0000:00/0000:00:1c.0/0000:01:00.0'"),
    ("sysfs-dup", "sysfs: cannot create duplicate filename '/bus/pci/devices/0000:01:00.0'"),
    # mm/oom_kill.c: dump_header, __oom_kill_process (its three callers'
    # words), out_of_memory
    ("oom", "fio invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, "
            "oom_score_adj=0"),
    ("oom", "kworker/u8:2 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"),
    ("oom", "Out of memory: Killed process 1234 (fio) total-vm:2449380kB, anon-rss:1920492kB, file-rss:0kB, "
            "shmem-rss:0kB, UID:0 pgtables:3904kB oom_score_adj:0"),
    ("oom", "Out of memory (oom_kill_allocating_task): Killed process 1234 (fio) total-vm:2449380kB, "
            "anon-rss:1920492kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:3904kB oom_score_adj:0"),
    ("oom", "Memory cgroup out of memory: Killed process 1234 (fio) total-vm:2449380kB, anon-rss:520192kB, "
            "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1168kB oom_score_adj:0"),
    ("oom", "Out of memory and no killable processes..."),
    # mm/page_alloc.c warn_alloc, from __alloc_pages_slowpath and mm/vmalloc.c
    ("alloc-failure", "kworker/u8:2: page allocation failure: order:4, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), "
                      "nodemask=(null),cpuset=/,mems_allowed=0"),
    ("alloc-failure", "irq/24-pciehp: page allocation failure: order:0, mode:0xa20(GFP_ATOMIC), "
                      "nodemask=(null),cpuset=/,mems_allowed=0"),
    ("alloc-failure", "fio: vmalloc error: size 67108864, page order 0, failed to allocate pages, "
                      "mode:0xdc2(GFP_KERNEL|__GFP_HIGHMEM|__GFP_ZERO), nodemask=(null),cpuset=/,mems_allowed=0"),
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
    # the lines around sysfs_warn_dup's (lib/kobject.c after a directory's;
    # a WARN()'s text in fs/sysfs/group.c)
    ("sysfs-dup", "kobject_add_internal failed for 0000:01:00.0 with -EEXIST, don't try to register things "
                  "with the same name in the same directory."),
    ("sysfs-dup", "sysfs: (bin_)attrs not set by subsystem for group: 0000:01:00.0/power"),
    # the OOM killer's other lines (suspend and resume print the first two),
    # and user space's words about it
    ("oom", "OOM killer disabled."),
    ("oom", "OOM killer enabled."),
    ("oom", "Tasks state (memory values in pages):"),
    ("oom", "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
            "task_memcg=/system.slice/lab-fio.service,task=fio,pid=1234,uid=0"),
    ("oom", "oom_reaper: reaped process 1234 (fio), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB"),
    ("oom", "memory: usage 524288kB, limit 524288kB, failcnt 1234"),
    ("oom", "Memory cgroup stats for /lab.slice/lab-fio.service:"),
    ("oom", "systemd[1]: lab-fio.service: A process of this unit has been killed by the OOM killer."),
    ("oom", "fio[1234]: Out of memory: Killed process 1234 (fio)"),
    # warn_alloc's memory state; the words in a device's message (its name
    # has a space, and is longer than a task's)
    ("alloc-failure", "Mem-Info:"),
    ("alloc-failure", "pcieport 0000:00:1c.0: page allocation failure: order:0, mode:0xa20(GFP_ATOMIC), "
                      "nodemask=(null)"),
    ("alloc-failure", "nvme nvme0: page allocation failure: order:0, mode:0xa20(GFP_ATOMIC), nodemask=(null)"),
    ("alloc-failure", "fio: page allocation failure"),
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


def c_rows():
    """findings.c's table: [(needle, kind, flags)], in order (flags: the
    set of its flag names, JOINS and NO_DUMP)."""
    text = FINDINGS_C.read_text()
    table = re.search(r"\} patterns\[\] = \{\n(.*?)\n\};", text, re.S).group(1)
    rows = re.findall(r'\{ "((?:[^"\\]|\\.)*)", "([a-z-]+)"(?:, ([A-Z_ |]+))? \},', table)
    assert rows and len(rows) == table.count("{ \""), table
    return [(needle.replace('\\"', '"'), kind, {f.strip() for f in flags.split("|") if f.strip()})
            for needle, kind, flags in rows]


def c_patterns():
    """findings.c's table: [(needle, kind)], in order."""
    return [(needle, kind) for needle, kind, _ in c_rows()]


def needle_regex(needle):
    """The table's matching rule: '^' opens the message, '*' any run, '%'
    a task's name (1 to 15 characters, none a space)."""
    anchored = needle.startswith("^")
    wild = {"*": ".*?", "%": "[^ ]{1,15}?"}
    body = "".join(wild.get(part) or re.escape(part) for part in re.split(r"([*%])", needle.lstrip("^")))
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
    a line user space wrote to the log, are no finding -- but for its stack
    dump: without the header no known report owns it, so it is one
    "unknown-trace" finding, named after the line before the dump."""
    kind, header, lines = debug_report(name)
    rest = [line for line in lines if line != header]
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *rest, "labprobe: " + header, AFTER))
    if "Call Trace:" not in rest:
        assert rc == 0 and rep["findings"] == [], rep["findings"]
        return
    t = rest.index("Call Trace:")
    named = next(line for line in reversed(rest[:t]) if line.strip() and not line.startswith("CPU: "))
    assert rc == 1 and [(f["kind"], f["line"]) for f in rep["findings"]] == [("unknown-trace", named)], \
        rep["findings"]


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


# --- sysfs-dup, oom, alloc-failure and stack dumps of no known report ---------
# Each report as Linux 6.1 prints it, record by record (fs/sysfs/dir.c
# sysfs_warn_dup, mm/oom_kill.c dump_header and __oom_kill_process,
# mm/page_alloc.c warn_alloc; the stack dump of lib/dump_stack.c and
# arch/x86/kernel/dumpstack.c): one finding of its kind, on its header, with
# the context around it; the "Call Trace:" inside it no finding of its own.

HW = "Hardware name: QEMU Standard PC (Q35 + ICH9, 2009), BIOS 1.16.2-debian-1.16.2-1 04/01/2014"
PCIEHP_CPU = f"CPU: 1 PID: 123 Comm: irq/24-pciehp {TAINT}"
FIO_CPU = f"CPU: 0 PID: 1234 Comm: fio {TAINT}"
KWORKER_CPU = f"CPU: 0 PID: 57 Comm: kworker/u8:2 {TAINT}"
IRQ_FRAMES = [" pciehp_ist+0x1c4/0x2a0", " irq_thread_fn+0x20/0x60", " irq_thread+0xee/0x1c0",
              " kthread+0xda/0x100", " ret_from_fork+0x22/0x30"]


def dump(cpu, *frames, workqueue=None):
    """dump_stack(): the task, the machine, the stack."""
    return [cpu, HW, *([f"Workqueue: {workqueue}"] if workqueue else []), "Call Trace:", " <TASK>",
            " dump_stack_lvl+0x44/0x5c", *frames, " </TASK>"]


SYSFS_DUP = ["sysfs: cannot create duplicate filename '/devices/pci0000:00/0000:00:1c.0/0000:01:00.0'",
             *dump(PCIEHP_CPU, " sysfs_warn_dup.cold+0x17/0x24", " sysfs_create_dir_ns+0xbc/0xd0",
                   " kobject_add_internal+0xb1/0x2b0", " kobject_add+0x7e/0xb0", " device_add+0x123/0x8f0",
                   " pci_device_add+0x1f2/0x5a0", " pci_scan_single_device+0xaf/0xd0", " pci_scan_slot+0x57/0x110",
                   " pciehp_configure_device+0x3a/0x110", *IRQ_FRAMES),
             "kobject_add_internal failed for 0000:01:00.0 with -EEXIST, don't try to register things with the "
             "same name in the same directory."]

MEM_INFO = ["Mem-Info:",
            "active_anon:480012 inactive_anon:1203 isolated_anon:0\\x0a active_file:52 inactive_file:31 "
            "isolated_file:0\\x0a unevictable:0 dirty:0 writeback:0",
            "Node 0 active_anon:1920048kB inactive_anon:4812kB active_file:208kB inactive_file:124kB",
            "Node 0 DMA free:7936kB boost:0kB min:44kB low:52kB high:60kB reserved_highatomic:0KB",
            "lowmem_reserve[]: 0 1907 1907 1907 1907",
            "Node 0 DMA32 free:44120kB boost:0kB min:5616kB low:7020kB high:8424kB",
            "lowmem_reserve[]: 0 0 0 0 0",
            "Node 0 DMA: 0*4kB 0*8kB 0*16kB 0*32kB 0*64kB 0*128kB 1*256kB (U) 1*512kB (U) = 7936kB",
            "Node 0 hugepages_total=0 hugepages_free=0 hugepages_surp=0 hugepages_size=2048kB",
            "1436 total pagecache pages", "0 pages in swap cache", "Free swap  = 0kB", "Total swap = 0kB",
            "524158 pages RAM", "0 pages HighMem/MovableOnly", "21093 pages reserved"]

OOM_HEADER = ("fio invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, "
              "oom_score_adj=0")
OOM_KILL = ("Out of memory: Killed process 1234 (fio) total-vm:2449380kB, anon-rss:1920492kB, file-rss:0kB, "
            "shmem-rss:0kB, UID:0 pgtables:3904kB oom_score_adj:0")
OOM_SUMMARY = ("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
               "task_memcg=/system.slice/lab-fio.service,task=fio,pid=1234,uid=0")
TASKS = ["Tasks state (memory values in pages):",
         "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name",
         *[f"[ {300 + k:6d}]     0 {300 + k:5d}     4417      301    69632        0             0 lab-{k}"
           for k in range(40)],
         "[   1234]     0  1234   612345   480123  3997696        0             0 fio"]


def oom_report(header=OOM_HEADER, kills=(OOM_KILL,), summary=OOM_SUMMARY, meminfo=MEM_INFO):
    """out_of_memory(): dump_header (its line, dump_stack(), the memory
    state, the tasks, the summary), then the kill line(s)."""
    return [header,
            *dump(FIO_CPU, " dump_header+0x4a/0x211", " oom_kill_process.cold+0xb/0x10",
                  " out_of_memory+0x1fd/0x4c0", " __alloc_pages_slowpath.constprop.0+0xc8c/0xe10",
                  " __alloc_pages+0x30f/0x330", " folio_alloc+0x17/0x50", " __filemap_get_folio+0x155/0x340",
                  " filemap_fault+0x139/0x910", " __do_fault+0x31/0x80", " do_fault+0x1b9/0x410",
                  " __handle_mm_fault+0x660/0xfa0", " handle_mm_fault+0xdb/0x2d0",
                  " do_user_addr_fault+0x191/0x570", " exc_page_fault+0x70/0x170", " asm_exc_page_fault+0x22/0x30",
                  "RIP: 0033:0x7f3c1a2b4c5d", "Code: Unable to access opcode bytes at 0x7f3c1a2b4c33.",
                  "RSP: 002b:00007ffd1b2c3d40 EFLAGS: 00010246"),
            *meminfo, *TASKS, summary, *kills]


MEMCG = "/lab.slice/lab-fio.service"
MEMCG_KILL = ("Memory cgroup out of memory: Killed process {} (fio) total-vm:2449380kB, anon-rss:520192kB, "
              "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1168kB oom_score_adj:0")
MEMCG_OOM = oom_report(
    header="fio invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
    meminfo=["memory: usage 524288kB, limit 524288kB, failcnt 1234",
             "swap: usage 0kB, limit 9007199254740988kB, failcnt 0",
             f"Memory cgroup stats for {MEMCG}:",
             "anon 532480000\\x0afile 0\\x0akernel 3207168\\x0akernel_stack 65536"],
    summary=(f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg={MEMCG},"
             f"task_memcg={MEMCG},task=fio,pid=1234,uid=0"),
    # memory.oom.group: every task of the group is killed (mm/memcontrol.c
    # mem_cgroup_print_oom_group, then a kill line each)
    kills=(MEMCG_KILL.format(1234), f"Tasks in {MEMCG} are going to be killed due to memory.oom.group set",
           MEMCG_KILL.format(1235), MEMCG_KILL.format(1236)))

ALLOC_HEADER = ("kworker/u8:2: page allocation failure: order:4, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), "
                "nodemask=(null),cpuset=/,mems_allowed=0")
ALLOC_FAILURE = [ALLOC_HEADER,
                 *dump(KWORKER_CPU, " warn_alloc+0x13a/0x1b0", " __alloc_pages_slowpath.constprop.0+0xd7a/0xe10",
                       " __alloc_pages+0x30f/0x330", " __kmalloc_large_node+0x7f/0x150",
                       " __kmalloc_node+0xb6/0x140", " nvme_alloc_admin_tag_set+0x5a/0x1c0",
                       " nvme_reset_work+0x5ff/0x11e0", " process_one_work+0x1ee/0x3b0",
                       " worker_thread+0x1d6/0x3b0", " kthread+0xda/0x100", " ret_from_fork+0x22/0x30",
                       workqueue="nvme-reset-wq nvme_reset_work"),
                 *MEM_INFO]

# dump_stack() from a caller whose words no pattern knows
UNKNOWN_HEADER = "pcieport 0000:00:1c.0: lab_dumper: a dump_stack() no pattern knows"
UNKNOWN = [UNKNOWN_HEADER, *dump(PCIEHP_CPU, " lab_dumper_probe+0x2a/0x40 [lab_dumper]", *IRQ_FRAMES)]

NEW_REPORTS = {
    "sysfs-dup": ("sysfs-dup", SYSFS_DUP[0], SYSFS_DUP),
    "oom": ("oom", OOM_HEADER, oom_report()),
    "memcg-oom-group": ("oom", MEMCG_OOM[0], MEMCG_OOM),
    "alloc-failure": ("alloc-failure", ALLOC_HEADER, ALLOC_FAILURE),
    "unknown-trace": ("unknown-trace", UNKNOWN_HEADER, UNKNOWN),
}


def trace_reach():
    """findings.c's TRACE_REACH"""
    return int(re.search(r"#define TRACE_REACH (\d+)", FINDINGS_C.read_text()).group(1))


def ctx_lines(finding):
    """a finding's context without the "[time] " of each line"""
    return [re.sub(r"^\[ *[0-9.]+\] ", "", line) for line in finding["context"]]


@pytest.mark.parametrize("name", NEW_REPORTS)
def test_new_report_is_one_finding_with_its_context(labprobe, tmp_path, name):
    """The whole report is one finding of its kind, on its header, with the
    lines around it (the default --context 8: the task, the machine, the
    "Call Trace:" and the first frames); its "Call Trace:" is no
    "unknown-trace" of its own, nor is any other line of it a finding."""
    kind, header, lines = NEW_REPORTS[name]
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *lines, AFTER))
    assert rc == 1, rep
    [f] = rep["findings"]
    assert (f["kind"], f["line"]) == (kind, header), rep["findings"]
    ctx = ctx_lines(f)
    assert lines[0] == header and ctx[:11] == BOOT + lines[:9], ctx
    assert header in ctx and "Call Trace:" in ctx and " <TASK>" in ctx and " dump_stack_lvl+0x44/0x5c" in ctx
    assert ctx == sorted(set(ctx), key=ctx.index), "a context line twice"
    assert [line for line in ctx if line in lines] == [line for line in lines if line in ctx], "not in log order"


def test_new_report_is_found_in_its_own_scan(labprobe, tmp_path):
    """--context 0: the finding's context is its line (and, for the OOM
    killer, its kill line; for an unknown trace, the dump's lines up to its
    "Call Trace:"): the reports one after another, each a finding. (The
    unknown trace comes first: right after a report it would be that
    report's.)"""
    text = log(*BOOT, *UNKNOWN, *SYSFS_DUP, *oom_report(), *ALLOC_FAILURE, AFTER)
    rc, rep = findings(labprobe, tmp_path, text, "--context", "0")
    assert rc == 1
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [
        ("unknown-trace", UNKNOWN_HEADER), ("sysfs-dup", SYSFS_DUP[0]), ("oom", OOM_HEADER),
        ("alloc-failure", ALLOC_HEADER)], rep["findings"]
    assert [ctx_lines(f) for f in rep["findings"]] == [UNKNOWN[:UNKNOWN.index("Call Trace:") + 1], [SYSFS_DUP[0]],
                                                       [OOM_HEADER, OOM_KILL], [ALLOC_HEADER]]


def test_oom_event_is_one_finding_with_its_kill_line(labprobe, tmp_path):
    """One OOM event, hundreds of records from "invoked oom-killer" to its
    kill line, is one finding: the kill line (with its summary line and the
    lines around it) is kept in its context, after the header's; so are a
    memory.oom.group's kill lines."""
    report = oom_report()
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *report, AFTER))
    [f] = rep["findings"]
    ctx = ctx_lines(f)
    assert report.index(OOM_KILL) - report.index(OOM_HEADER) > 2 * 8 + 1
    assert ctx[:9] == BOOT + report[:7] and ctx[-10:] == report[-9:] + [AFTER], ctx
    assert OOM_SUMMARY in ctx and OOM_KILL in ctx and TASKS[0] not in ctx

    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *MEMCG_OOM, AFTER), "--context", "0")
    [f] = rep["findings"]
    assert ctx_lines(f) == [MEMCG_OOM[0]] + [MEMCG_KILL.format(pid) for pid in (1234, 1235, 1236)]


def test_two_oom_events_are_two_findings(labprobe, tmp_path):
    """Each "invoked oom-killer" opens an event of its own; a kill line
    without one (dump_header is rate-limited) is a finding of its own, as
    is one after a finding of another kind; a kill line whose header an
    earlier scan read (--since-seq) is this scan's finding."""
    other_kill = OOM_KILL.replace("1234", "1240")
    text = log(*BOOT, *oom_report(), *oom_report(kills=(other_kill,)), AFTER)
    rc, rep = findings(labprobe, tmp_path, text, "--context", "0")
    assert [(f["kind"], ctx_lines(f)) for f in rep["findings"]] == [
        ("oom", [OOM_HEADER, OOM_KILL]), ("oom", [OOM_HEADER, other_kill])], rep["findings"]

    rc, rep = findings(labprobe, tmp_path, log(*BOOT, OOM_KILL, AFTER), "--context", "0")
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [("oom", OOM_KILL)]

    report = oom_report()
    text = log(*BOOT, *report[:-1], "WARNING: CPU: 0 PID: 1234 at mm/page_alloc.c:5527 f+0x1/0x2", report[-1])
    rc, rep = findings(labprobe, tmp_path, text, "--context", "0")
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [
        ("oom", OOM_HEADER), ("warning", "WARNING: CPU: 0 PID: 1234 at mm/page_alloc.c:5527 f+0x1/0x2"),
        ("oom", OOM_KILL)], rep["findings"]

    lines = [*BOOT, *report]
    rc, rep = findings(labprobe, tmp_path, log(*lines), "--since-seq", str(len(lines) - 1))
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [("oom", OOM_KILL)], rep["findings"]


def test_unknown_trace_names_the_line_before_the_dump(labprobe, tmp_path):
    """A stack dump no report owns is an "unknown-trace" finding named after
    its header: the line before the lines dump_stack() and show_regs()
    print ahead of "Call Trace:" (6.12's "CPU: 1 UID: 0 PID: ..." and
    later kernels' "Tainted:" among them), the context from that line to
    the dump's frames; with no line before it, the "Call Trace:" itself."""
    nmi = ["NMI backtrace for cpu 1",
           "CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Tainted: G        W          6.12.0-labtest #1",
           "Tainted: [W]=WARN", HW, "RIP: 0010:default_idle+0xf/0x20",
           "Code: 4c 01 c7 4c 29 c2 e9 72 ff ff ff 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 90 f3 0f 1e fa "
           "eb 07 0f 00 2d d3 0e 33 00 fb f4 <fa> c3 cc cc cc cc 66 66 2e 0f 1f 84 00 00 00 00 00",
           "RSP: 0018:ffffc900000b7ee8 EFLAGS: 00000252",
           "RAX: ffff88803ecb3a00 RBX: 0000000000000001 RCX: 4000000000000000",
           "RDX: 0000000000000001 RSI: 0000000000000087 RDI: 0000000000029bd4",
           "RBP: ffff8880031f8000 R08: 0000000000029bd4 R09: ffff88803ecb0000",
           "R10: 0000000000000001 R11: 0000000000000000 R12: 0000000000000000",
           "R13: 0000000000000000 R14: 0000000000000000 R15: 0000000000000000",
           "FS:  0000000000000000(0000) GS:ffff88803ec80000(0000) knlGS:0000000000000000",
           "CS:  0010 DS: 0000 ES: 0000 CR0: 0000000080050033",
           "CR2: 00007f3c1a2b4c33 CR3: 000000000260a000 CR4: 0000000000750ef0", "PKRU: 55555554",
           "Call Trace:", " <NMI>", " nmi_cpu_backtrace.cold+0x32/0x68", " </NMI>", " <TASK>",
           " default_idle_call+0x2c/0xe0", " do_idle+0x1f1/0x270", " </TASK>"]
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *nmi, AFTER), "--context", "0")
    [f] = rep["findings"]
    assert (f["kind"], f["line"]) == ("unknown-trace", "NMI backtrace for cpu 1")
    assert ctx_lines(f) == nmi[:nmi.index("Call Trace:") + 1]

    bare = dump(PCIEHP_CPU, *IRQ_FRAMES)
    rc, rep = findings(labprobe, tmp_path, log(*bare), "--context", "0")
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [("unknown-trace", "Call Trace:")], rep


@pytest.mark.parametrize("kind, line", [
    ("warning", "WARNING: CPU: 1 PID: 123 at drivers/pci/hotplug/pciehp_hpc.c:612 pciehp_ist+0x1c4/0x2a0"),
    ("bug", "BUG: kernel NULL pointer dereference, address: 0000000000000040"),
    ("lockdep", "WARNING: possible circular locking dependency detected"),
    ("hung-task", "INFO: task irq/24-pciehp:123 blocked for more than 10 seconds."),
    ("spurious-irq", 'irq 24: nobody cared (try booting with the "irqpoll" option)'),
    ("sysfs-dup", SYSFS_DUP[0]), ("oom", OOM_HEADER), ("alloc-failure", ALLOC_HEADER)])
def test_a_report_owns_its_stack_dumps(labprobe, tmp_path, kind, line):
    """A report's stack dump, right after its line or TRACE_REACH records
    later (lockdep's, after the stacks of its dependency chain), is no
    finding of its own; nor are the dumps after it, each within
    TRACE_REACH records of the one before (an RCU stall's NMI backtraces).
    A dump farther away is an "unknown-trace"."""
    reach = trace_reach()
    def filler(n):
        return [f"       lock_acquire+0x{k:x}/0x480" for k in range(n)]

    first = dump(PCIEHP_CPU, *IRQ_FRAMES)
    second = ["Sending NMI from CPU 0 to CPUs 1:", "NMI backtrace for cpu 1", *dump(PCIEHP_CPU, *IRQ_FRAMES)]
    lines = [line, *filler(reach - 4), "stack backtrace:", *first, *filler(reach - len(first) - 2), *second]
    traces = [k for k, text in enumerate(lines) if text == "Call Trace:"]
    assert traces == [reach, 2 * reach], traces
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *lines, AFTER), "--context", "0")
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [(kind, line)], rep["findings"]

    far = [line, *filler(reach - 3), "stack backtrace:", *dump(PCIEHP_CPU, *IRQ_FRAMES)]
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *far, AFTER), "--context", "0")
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [(kind, line), ("unknown-trace", "stack backtrace:")]


def test_a_dump_long_after_a_report_is_not_its(labprobe, tmp_path):
    """A report is printed in one go: a stack dump a few records after a
    report's line but more than TRACE_SECONDS later (a quiet log) is an
    "unknown-trace", not that report's."""
    seconds = float(re.search(r"#define TRACE_SECONDS ([0-9.]+)", FINDINGS_C.read_text()).group(1))
    warn = "WARNING: CPU: 1 PID: 123 at drivers/pci/hotplug/pciehp_hpc.c:612 pciehp_ist+0x1c4/0x2a0"
    lines = [*BOOT, warn, *UNKNOWN]
    usec = [k * 1000 for k in range(3)] + [int((seconds + 1) * 1e6) + k * 1000 for k in range(len(lines) - 3)]
    text = "".join(f"4,{k + 1},{usec[k]},-;{line}\n" for k, line in enumerate(lines))
    rc, rep = findings(labprobe, tmp_path, text, "--context", "0")
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [("warning", warn),
                                                                 ("unknown-trace", UNKNOWN_HEADER)], rep
    text = log(*lines)
    rc, rep = findings(labprobe, tmp_path, text, "--context", "0")
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [("warning", warn)], rep


def test_a_report_before_the_scan_owns_its_dump_in_it(labprobe, tmp_path):
    """--since-seq between a report's line and its stack dump: the dump
    belongs to the report an earlier scan found, no finding of this scan."""
    lines = [*BOOT, *SYSFS_DUP, AFTER]
    rc, rep = findings(labprobe, tmp_path, log(*lines), "--since-seq", str(len(BOOT) + 2))
    assert rc == 0 and rep["findings"] == [], rep["findings"]


def test_pciehp_state_owns_no_stack_dump(labprobe, tmp_path):
    """pciehp's state lines print no stack dump: one right after them is an
    "unknown-trace" of its own (an expected "Timeout on hotplug command"
    must not hide it)."""
    line = "pcieport 0000:00:1c.0: pciehp: Timeout on hotplug command 0x0000 (issued 1016 msec ago)"
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, line, *dump(PCIEHP_CPU, *IRQ_FRAMES), AFTER),
                       "--context", "0")
    assert [(f["kind"], f["line"]) for f in rep["findings"]] == [("pciehp-state", line), ("unknown-trace", line)]


def test_sysrq_dumps_are_no_finding(labprobe, tmp_path):
    """The blocked tasks' stacks sysrq w puts into the log (steps/vm-restart.yml
    asks for them before a restart), more than TRACE_REACH records of them,
    are no finding."""
    tasks = []
    for k in range(trace_reach() // 10 + 5):
        tasks += [f"task:kworker/u4:{k:<6} state:D stack:14144 pid:{100 + k:<5} ppid:2      flags:0x00004000",
                  "Workqueue: nvme-reset-wq nvme_reset_work", "Call Trace:", " <TASK>", " __schedule+0x29b/0x740",
                  " schedule+0x57/0xa0", " io_schedule_timeout+0x4c/0x80", " blk_execute_rq+0xdb/0x200",
                  " nvme_reset_work+0x5ff/0x11e0", " </TASK>"]
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, "sysrq: Show Blocked State", *tasks, AFTER))
    assert rc == 0 and rep["findings"] == [], rep["findings"]


@pytest.mark.parametrize("lines", [
    ["labprobe: Call Trace:", "labprobe:  <TASK>"],
    # a stack printed without "Call Trace:" (lockdep's chain, KASAN's
    # "Allocated by task"): its report's own lines, no dump
    ["Allocated by task 1:", " kasan_save_stack+0x1e/0x40", " __kasan_kmalloc+0x7f/0x90",
     " pci_alloc_dev+0x2a/0xd0", ""],
    ["Call Trace: <TASK>"],
], ids=["user-space", "stack-without-call-trace", "not-the-line"])
def test_trace_look_alike_is_no_finding(labprobe, tmp_path, lines):
    rc, rep = findings(labprobe, tmp_path, log(*BOOT, *lines, AFTER))
    assert rc == 0 and rep["findings"] == [], rep["findings"]
