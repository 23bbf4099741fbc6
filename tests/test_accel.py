"""lab/tools/accel-probe: lab_accel=auto chooses KVM only where a kernel
really boots under it. A stand-in QEMU (a shell script that behaves as a
booting, hanging or failing QEMU would on its serial port) drives each
branch; the real probe on this host is in test_probe_on_this_host."""

import json
import os

import pytest

from conftest import REPO, run

PROBE = REPO / "lab/tools/accel-probe"
CACHE = os.environ.get("PCIEHP_LAB_CACHE", "/var/cache/pciehp-lab")


def fake_qemu(tmp_path, behaviour):
    """A QEMU that writes what a guest would to -serial file:PATH, then
    exits, hangs or fails as behaviour says."""
    body = {
        "boots": 'echo "Linux version 6.1.0-lab"; echo "Kernel panic - not syncing: VFS: Unable to mount root fs"',
        "hangs": 'echo "Probing EDD (edd=off to disable)... ok"; sleep 60',
        "fails": 'echo "qemu-system-x86_64: error: failed to set MSR 0x10a" >&2; exit 1',
    }[behaviour]
    q = tmp_path / f"qemu-{behaviour}"
    q.write_text(f"""#!/bin/bash
for a; do case $prev in -serial) serial=${{a#file:}} ;; esac; prev=$a; done
exec >"$serial"
{body}
""")
    q.chmod(0o755)
    kernel = tmp_path / "bzImage"
    kernel.write_bytes(b"\\0" * 512)
    return str(q), str(kernel)


def probe(*args):
    r = run([str(PROBE), *args], timeout=120)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="needs /dev/kvm to reach the boot probe")
@pytest.mark.parametrize("behaviour,accel", [("boots", "kvm"), ("hangs", "tcg"), ("fails", "tcg")])
def test_auto_chooses_kvm_only_when_the_kernel_ran(behaviour, accel, tmp_path):
    qemu, kernel = fake_qemu(tmp_path, behaviour)
    rc, out, err = probe("auto", qemu, kernel, "2")
    assert rc == 0, err
    assert out["requested"] == "auto" and out["accel"] == accel, out
    if accel == "tcg":
        assert "TCG chosen" in out["reason"] and out["console_tail"], out
        assert ("within 2 s" if behaviour == "hangs" else "exit 1") in out["reason"], out


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="needs /dev/kvm to reach the boot probe")
def test_kvm_required_fails_where_no_kernel_runs(tmp_path):
    qemu, kernel = fake_qemu(tmp_path, "hangs")
    rc, out, err = probe("kvm", qemu, kernel, "2")
    assert rc == 1 and "lab_accel=kvm, but the probe kernel did not reach its root mount" in err, err
    assert out["accel"] == "tcg" and out["reason"].startswith("lab_accel=kvm refused"), out


@pytest.mark.skipif(not os.access("/dev/kvm", os.R_OK | os.W_OK), reason="needs /dev/kvm to reach the boot probe")
def test_outcome_is_cached_a_host(tmp_path):
    qemu, kernel = fake_qemu(tmp_path, "boots")
    cache = tmp_path / "cache"
    cache.mkdir()
    rc, first, _ = probe("--cache", str(cache), "auto", qemu, kernel, "2")
    assert rc == 0 and first["accel"] == "kvm" and "cached" not in first["reason"], first
    assert first["probe_seconds"] is not None
    rc, again, _ = probe("--cache", str(cache), "auto", qemu, kernel, "2")
    assert rc == 0 and again["accel"] == "kvm" and "(cached: " in again["reason"], again
    # another QEMU binary at the same path is probed again
    os.unlink(qemu)
    fake_qemu(tmp_path, "fails")
    os.rename(str(tmp_path / "qemu-fails"), qemu)
    rc, third, _ = probe("--cache", str(cache), "auto", qemu, kernel, "2")
    assert rc == 0 and third["accel"] == "tcg" and "cached" not in third["reason"], third
    # and its tcg outcome is cached too, and refuses lab_accel=kvm
    rc, fourth, err = probe("--cache", str(cache), "kvm", qemu, kernel, "2")
    assert rc == 1 and "(cached: " in fourth["reason"] and "lab_accel=kvm, but QEMU under KVM ended" in err, err


def test_tcg_never_probes_and_bad_arguments_are_named(tmp_path):
    rc, out, _ = probe("tcg", "/nonexistent/qemu", "/nonexistent/kernel")
    assert rc == 0 and out == {"requested": "tcg", "accel": "tcg", "reason": "lab_accel=tcg: not probed",
                               "probe_seconds": None, "console_tail": []}
    rc, out, err = probe("fast", "/usr/bin/true", "/etc/hostname")
    assert rc == 2 and "lab_accel=fast: use auto, kvm or tcg" in err
    rc, out, err = probe("auto", "/usr/bin/true", str(tmp_path / "none"))
    assert rc == 2 and "probe kernel" in err and "is missing" in err
    rc, out, err = probe("auto", "/usr/bin/true", "/etc/hostname", "0")
    assert rc == 2 and "SECONDS=0" in err


def test_probe_on_this_host():
    """The probe as a run makes it, with a kernel the lab built: auto gives
    a choice and its reason; kvm only with the kernel's own panic seen."""
    kernels = sorted(p for p in (os.path.join(CACHE, "kernels", d, "bzImage")
                                 for d in (os.listdir(os.path.join(CACHE, "kernels"))
                                           if os.path.isdir(os.path.join(CACHE, "kernels")) else []))
                     if os.path.exists(p))
    if not kernels:
        pytest.skip("no lab kernel built yet (the end-to-end tests build one)")
    rc, out, err = probe("auto", "/usr/bin/qemu-system-x86_64", kernels[0], "30")
    assert rc == 0, err
    assert out["accel"] in ("kvm", "tcg") and out["reason"], out
    if out["accel"] == "kvm":
        assert any("Kernel panic" in x for x in out["console_tail"]), out
