"""The kernel patch series (kernel/patches/series) against Debian's
linux-source-6.1: every patch applies in order with lab/tools/apply-series
(git apply: no fuzz, no hunk dropped) onto a fresh copy of the pristine
tree, and is clean under
`scripts/checkpatch.pl --strict` except for findings that kernel/README.md
lists as kept, with a reason.

The fresh tree comes from the lab's pristine cache when it exists (only
scripts/ and the files the series touches are copied: patch and checkpatch
need nothing else), otherwise from /usr/src/linux-source-6.1.tar.xz
(about 20 s). PCIEHP_LAB_SERIES_FROM_TARBALL=1 forces the tarball.
"""

import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import REPO

TARBALL = pathlib.Path("/usr/src/linux-source-6.1.tar.xz")
CACHE = pathlib.Path(os.environ.get("PCIEHP_LAB_CACHE", "/var/cache/pciehp-lab"))
PATCHES = REPO / "kernel/patches"
README = REPO / "kernel/README.md"
FINDING = re.compile(r"^(ERROR|WARNING|CHECK):([A-Z0-9_]+):")
# kernel/README.md lists kept findings as: - `PATCH`: `KIND:TYPE` reason...
KEPT = re.compile(r"^\s*[-*]\s+`([^`]+\.patch)`:\s+`((?:ERROR|WARNING|CHECK):[A-Z0-9_]+)`")


def series():
    """Patch file names in kernel/patches/series, in order."""
    names = []
    for line in (PATCHES / "series").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def tree_version():
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "linux-source-6.1"],
                       text=True, capture_output=True)
    return r.stdout.strip() if r.returncode == 0 else None


def touched_paths(patch):
    """Tree-relative paths a -p1 patch reads or writes (old and new names)."""
    paths = set()
    for line in patch.read_text(errors="replace").splitlines():
        m = re.match(r"^(?:---|\+\+\+) [ab]/(\S+)", line)
        if m:
            paths.add(m.group(1))
    return paths


def kept_findings():
    """{(patch, 'KIND:TYPE')} that kernel/README.md justifies."""
    if not README.is_file():
        return set()
    return {m.groups() for m in map(KEPT.match, README.read_text().splitlines()) if m}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A fresh, writable copy of the pristine tree (or of the part of it the
    series and checkpatch use); never the cached tree itself."""
    # tests/run installs the tree: a checkpatch that silently skips proves nothing
    assert TARBALL.is_file(), (f"{TARBALL} missing: Debian's linux-source-6.1 package is not installed "
                               "(apt-get install linux-source-6.1)")
    dest = tmp_path_factory.mktemp("kernel-series") / "linux"
    version = tree_version()
    cached = CACHE / "src" / f"linux-source-{version}" if version else None
    if (cached and (cached / ".extracted").is_file()
            and not os.environ.get("PCIEHP_LAB_SERIES_FROM_TARBALL")):
        shutil.copytree(cached / "scripts", dest / "scripts", symlinks=True)
        for name in series():
            for rel in touched_paths(PATCHES / name):
                src = cached / rel
                if src.is_file():
                    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dest / rel)
    else:
        top = dest.parent
        r = subprocess.run(["tar", "-C", str(top), "-xJf", str(TARBALL)],
                           text=True, capture_output=True, timeout=900)
        assert r.returncode == 0, f"extracting {TARBALL} failed: {r.stderr}"
        (top / "linux-source-6.1").rename(dest)
    return dest


def test_series_names_existing_patches():
    missing = [n for n in series() if not (PATCHES / n).is_file()]
    assert not missing, f"kernel/patches/series names missing files: {missing}"
    assert len(set(series())) == len(series()), "a patch is listed twice in series"


APPLY = REPO / "lab/tools/apply-series"


def apply_series(tree, *patches):
    """lab/tools/apply-series, the kernel build's own way of applying."""
    return subprocess.run([str(APPLY), str(tree), *map(str, patches)],
                          text=True, capture_output=True, timeout=300)


def test_series_applies_in_order(pristine):
    r = apply_series(pristine, *(PATCHES / name for name in series()))
    assert r.returncode == 0, f"the series does not apply:\n{r.stdout}{r.stderr}"
    assert r.stdout.split() == [w for name in series() for w in ("applied", name)], r.stdout
    rejects = sorted(str(p.relative_to(pristine)) for p in pristine.rglob("*.rej"))
    assert not rejects, f"reject files left: {rejects}"


def test_a_hunk_with_a_stray_line_is_refused_not_cut_short(tmp_path):
    """The CI failure of ci12: a hand-edited hunk carried one context line
    more than its header counts. GNU patch ends the file's diff there and
    drops the later hunks without an error; apply-series must refuse it
    and leave the tree as it was."""
    tree = tmp_path / "linux"
    (tree / "d").mkdir(parents=True)
    lines = [f"line {i}" for i in range(1, 21)]
    (tree / "d/f.c").write_text("\n".join(lines) + "\n")
    bad = tmp_path / "bad.patch"
    bad.write_text(
        "diff --git a/d/f.c b/d/f.c\n--- a/d/f.c\n+++ b/d/f.c\n"
        "@@ -1,3 +1,4 @@\n line 1\n+added 1\n line 2\n line 3\n line 4\n"
        "@@ -15,3 +16,4 @@\n line 15\n+added 2\n line 16\n line 17\n")
    r = apply_series(tree, bad)
    assert r.returncode != 0 and "bad.patch does not apply" in r.stderr, (r.stdout, r.stderr)
    assert (tree / "d/f.c").read_text() == "\n".join(lines) + "\n", "a refused patch changed the tree"
    # the same patch, counted right, applies both hunks
    bad.write_text(bad.read_text().replace(" line 3\n line 4\n@@", " line 3\n@@"))
    r = apply_series(tree, bad)
    assert r.returncode == 0, r.stderr
    text = (tree / "d/f.c").read_text()
    assert "added 1" in text and "added 2" in text


def test_apply_series_ignores_a_repository_above_the_tree(tmp_path):
    """A kernel tree inside a git checkout (a cache dir under one): git
    apply run in a subdirectory would skip paths outside it silently."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree = tmp_path / "cache/linux"
    (tree / "a").mkdir(parents=True)
    (tree / "a/x.c").write_text("one\n")
    p = tmp_path / "x.patch"
    p.write_text("diff --git a/a/x.c b/a/x.c\n--- a/a/x.c\n+++ b/a/x.c\n@@ -1 +1,2 @@\n one\n+two\n")
    r = apply_series(tree, p)
    assert r.returncode == 0, r.stderr
    assert (tree / "a/x.c").read_text() == "one\ntwo\n"


@pytest.mark.parametrize("name", series())
def test_checkpatch_strict(pristine, name):
    r = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict", "--no-tree",
                        "--show-types", "--color=never", str(PATCHES / name)],
                       cwd=pristine, text=True, capture_output=True, timeout=300,
                       # checkpatch checks a file git tracks as source, not as a patch
                       env=dict(os.environ, GIT_DIR="/nonexistent"))
    assert "total:" in r.stdout, f"checkpatch did not run:\n{r.stdout}{r.stderr}"
    kept = kept_findings()
    found = [line for line in r.stdout.splitlines() if FINDING.match(line)]
    unjustified = [f for f in found
                   if (name, ":".join(FINDING.match(f).groups())) not in kept]
    assert not unjustified, (
        f"checkpatch --strict findings in {name} not listed as kept in kernel/README.md:\n"
        + r.stdout)


MODULE_SOURCES = sorted((REPO / "kernel/modules").glob("*/*.[ch]"))


@pytest.mark.parametrize("source", MODULE_SOURCES, ids=[p.name for p in MODULE_SOURCES])
def test_module_source_is_checkpatch_strict_clean(pristine, source):
    """kernel/modules/ is kernel code too: checkpatch --strict on the file."""
    r = subprocess.run(["perl", "scripts/checkpatch.pl", "--strict", "--no-tree", "--show-types",
                        "--color=never", "-f", str(source)],
                       cwd=pristine, text=True, capture_output=True, timeout=300,
                       env=dict(os.environ, GIT_DIR="/nonexistent"))
    assert "total: 0 errors, 0 warnings, 0 checks" in r.stdout, r.stdout


# --- the debug variant (kernel/config/debug.config, kernel-build --variant debug)

DEBUG_CONFIG = REPO / "kernel/config/debug.config"
KERNEL_BUILD = REPO / "lab/tools/kernel-build"


def config_lines(path):
    """{option: line} of a fragment's CONFIG_X=... and '# CONFIG_X is not set' lines."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^(CONFIG_[A-Z0-9_]+)=", line) or re.match(r"^# (CONFIG_[A-Z0-9_]+) is not set$", line)
        if m:
            out[m.group(1)] = line
        else:
            assert line.startswith("#") or not line.strip(), f"{path.name}: not an option or comment: {line!r}"
    return out


def test_debug_fragment_asks_for_the_checks_and_leaves_lab_config_alone():
    """debug.config turns on what the debug variant is for, and sets no
    option lab.config sets: kernel-build checks both after olddefconfig, and
    an override would fail lab.config's own check."""
    debug = config_lines(DEBUG_CONFIG)
    for opt in ("CONFIG_PROVE_LOCKING=y", "CONFIG_DEBUG_ATOMIC_SLEEP=y", "CONFIG_KASAN=y",
                "CONFIG_KASAN_GENERIC=y", "CONFIG_LOCK_STAT=y"):
        assert debug.get(opt.split("=")[0]) == opt, opt
    assert not set(debug) & set(config_lines(REPO / "kernel/config/lab.config"))


def key_of(script, variant):
    r = subprocess.run([str(script), "--variant", variant, "--repo", str(REPO), "--key-only"],
                       text=True, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return pathlib.Path(r.stdout.strip()).name


def test_debug_variant_has_its_own_key_and_leaves_stock_and_patched_keys(tmp_path):
    """kernel-build hashes itself into every key; the debug variant's lines
    sit between '# >>> debug variant' / '# <<< debug variant' markers that
    the stock and patched keys leave out, so adding or changing them keeps
    those builds. A change anywhere else changes every key; the debug key
    changes with its own lines too."""
    if tree_version() is None or not TARBALL.is_file():
        pytest.skip("linux-source-6.1 is not installed (kernel-build --key-only needs its version)")
    keys = {v: key_of(KERNEL_BUILD, v) for v in ("stock", "patched", "debug")}
    assert [k.split("-")[0] for k in keys.values()] == ["stock", "patched", "debug"]
    assert len({k.split("-")[1] for k in keys.values()}) == 3
    text = KERNEL_BUILD.read_text()
    assert text.count("# >>> debug variant\n") == text.count("# <<< debug variant\n") >= 5

    inside = tmp_path / "inside"
    inside.write_text(text.replace("debug) ;;\n", "debug) : ;;\n", 1))
    outside = tmp_path / "outside"
    outside.write_text(text.replace("set -euo pipefail\n", "set -euo pipefail\n:\n", 1))
    for script in (inside, outside):
        script.chmod(0o755)
    # the copies apply patches with the apply-series beside them, as the real one does
    shutil.copy2(REPO / "lab/tools/apply-series", tmp_path / "apply-series")
    assert {v: key_of(inside, v) for v in ("stock", "patched")} == {v: keys[v] for v in ("stock", "patched")}
    assert key_of(inside, "debug") != keys["debug"]
    assert all(key_of(outside, v) != keys[v] for v in keys)


@pytest.mark.parametrize("tool", ["kernel-build", "qemu-build"])
def test_a_build_tool_without_apply_series_beside_it_refuses(tmp_path, tool):
    """apply-series is part of both build keys: a tool copied away from it
    must stop, not hash a missing file into a key that silently differs."""
    script = tmp_path / tool
    shutil.copy2(REPO / "lab/tools" / tool, script)
    args = ["--variant", "patched"] if tool == "kernel-build" else []
    r = subprocess.run([str(script), *args, "--repo", str(REPO), "--key-only"],
                       text=True, capture_output=True, timeout=60)
    assert r.returncode == 1 and "apply-series is missing" in r.stderr, (r.returncode, r.stderr)
