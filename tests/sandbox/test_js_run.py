"""Vitest projects' tests run in the sandbox (sandbox.js_run): outcomes, selection, refusals and attacks.

Each test builds a small project in a temporary directory around the lock file pinned in
fixtures/js/runner (vitest 4.1.12). Its node_modules is installed once per lock on this host (the
first run needs the npm registry, about 10 s) and reused by every later run; skipped only where
node or npm is not installed at all.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import node_env, results
from sandbox.backends.base import SandboxError
from sandbox.backends.bwrap import BwrapBackend
from sandbox.js_run import THREAD_ENV, run_js_tests, selection
from sandbox.node_env import (
    NODE,
    NodeEnvError,
    check_lock,
    check_manifest,
    ensure_node_modules,
    lock_files,
    resolve_lock,
)

pytestmark = pytest.mark.skipif(
    not Path(NODE).exists() or shutil.which("npm") is None, reason="node or npm is not installed"
)
LOCKED = Path(__file__).parent / "fixtures" / "js" / "runner"
FILE = "src/math.test.js"
MATH_TEST = """import { describe, expect, test } from "vitest";
import { add } from "./math.js";

describe("add", () => {
  test("adds", () => { expect(add(1, 2)).toBe(3); });
  test("breaks", () => { expect(add(1, 2)).toBe(4); });
});
test("top level", () => {});
test("odd (name) [x] * $y | z/w", () => {});
"""


@pytest.fixture(scope="session")
def node_modules() -> Path:
    return ensure_node_modules(LOCKED)


@pytest.fixture
def project(tmp_path: Path, node_modules: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(LOCKED / name, root / name)
    (root / "src" / "math.js").write_text("export const add = (a, b) => a + b;\n")
    (root / FILE).write_text(MATH_TEST)
    return root


def run(root: Path, *names: str, file: str = FILE) -> results.TestReport:
    return run_js_tests(root, [f"{file}::{n}" for n in names], 60, backend=BwrapBackend())


def outcomes(report: results.TestReport, file: str = FILE) -> dict[str, str]:
    return {k.removeprefix(f"{file}::"): str(v.outcome) for k, v in report.tests.items()}


def test_passes_and_failures_of_the_named_tests_others_skipped(project: Path) -> None:
    report = run(project, "add > adds", "add > breaks")
    assert outcomes(report) == {
        "add > adds": "passed",
        "add > breaks": "failed",
        "top level": "skipped",
        "odd (name) [x] * $y | z/w": "skipped",
    }
    assert report.inconsistencies == [] and not report.unsafe
    assert report.exec.exit_code == 1 and report.exec.duration_ms > 0
    assert "expected 3 to be 4" in report.tests[f"{FILE}::add > breaks"].message
    assert not (project / "node_modules").exists()  # the mount point went with the run


def test_a_title_two_cases_share_reads_as_one_failing_test_and_the_run_is_believed(project: Path) -> None:
    # it.each titles that interpolate alike: one id, two results, one of them a failure.
    (project / FILE).write_text(
        'import { expect, test } from "vitest";\n'
        'test.each([[1, true], [2, false]])("same title", (_n, ok) => { expect(ok).toBe(true); });\n'
    )
    report = run(project, "same title")
    assert outcomes(report) == {"same title": "failed"}
    assert report.inconsistencies == [] and report.valid


def test_a_name_full_of_regex_syntax_selects_itself_only(project: Path) -> None:
    report = run(project, "odd (name) [x] * $y | z/w")
    assert outcomes(report)["odd (name) [x] * $y | z/w"] == "passed"
    assert outcomes(report)["add > breaks"] == "skipped"
    assert report.exec.exit_code == 0 and report.valid


def test_a_typescript_test_file_runs_as_it_is(project: Path) -> None:
    (project / "src" / "typed.test.ts").write_text(
        'import { expect, test } from "vitest";\nimport { add } from "./math.js";\n'
        'const twice = (n: number): number => add(n, n);\ntest("typed", () => { expect(twice(2)).toBe(4); });\n'
    )
    report = run(project, "typed", file="src/typed.test.ts")
    assert outcomes(report, "src/typed.test.ts") == {"typed": "passed"} and report.valid


def test_a_file_name_full_of_glob_syntax_selects_itself_only(project: Path) -> None:
    odd = "src/[id] (x) {a,b} *.test.js"
    shutil.copy(project / FILE, project / odd)
    report = run(project, "add > adds", file=odd)
    assert set(report.tests) == {
        f"{odd}::add > adds",
        f"{odd}::add > breaks",
        f"{odd}::top level",
        f"{odd}::odd (name) [x] * $y | z/w",
    }
    assert report.passed(f"{odd}::add > adds") and report.valid


def test_a_title_holding_the_separator_is_selected_by_its_id(project: Path) -> None:
    """An id cannot tell " > " in a title from nesting; the name pattern takes either, so the listed
    test runs (it was skipped, and an honest patch broke a pass-to-pass test it never ran). The other
    reading of the id (describe "is", test "'minute'") names the second test, which runs too: it is
    reported, and scoring counts only the listed ids."""
    odd = "src/gt.test.js"
    (project / odd).write_text(
        'import { describe, test } from "vitest";\n'
        'describe("precision", () => {\n'
        "  test(\"is > 'minute'\", () => {});\n"
        "  test(\"is 'minute'\", () => { throw new Error('not this one'); });\n"
        "});\n"
    )
    report = run(project, "precision > is > 'minute'", file=odd)
    assert report.passed(f"{odd}::precision > is > 'minute'") and report.valid, outcomes(report, odd)


def test_a_file_id_runs_the_whole_file_and_bad_paths_are_refused(project: Path) -> None:
    assert selection(project, [FILE, f"{FILE}::add > adds"]) == ([FILE], None)
    for bad in ("../x.test.js::t", "/etc/passwd::t", "src/none.test.js::t", "-c.js::t", "src//math.test.js::t"):
        with pytest.raises(SandboxError):
            selection(project, [bad])


def test_the_repositorys_own_config_decides_nothing(project: Path) -> None:
    (project / "vitest.config.js").write_text(
        'export default { test: { reporters: ["verbose"], outputFile: "out.xml", include: ["nothing/**"],'
        ' setupFiles: ["./src/setup.js"], testNamePattern: "top" } };\n'
    )
    (project / "vite.config.js").write_text('throw new Error("vite.config.js was loaded");\n')
    (project / "src" / "setup.js").write_text('throw new Error("the repository setup file ran");\n')
    package = json.loads((project / "package.json").read_text())
    (project / "package.json").write_text(json.dumps({**package, "vitest": {"reporters": ["dot"]}}))
    report = run(project, "add > adds", "add > breaks")
    assert outcomes(report)["add > adds"] == "passed" and outcomes(report)["add > breaks"] == "failed"
    assert report.inconsistencies == []
    assert not (project / "out.xml").exists()


FORGE_TEST = """import { test, expect } from "vitest";
import fs from "node:fs";

const pass = '<?xml version="1.0"?><testsuites><testsuite name="x" tests="1">' +
  '<testcase classname="src/forge.test.js" name="forges"/></testsuite></testsuites>';
const summary = JSON.stringify({ success: true, numPassedTests: 1, numFailedTests: 0, numPendingTests: 0,
  numTodoTests: 0, numTotalTests: 1, testResults: [{ name: "/workspace/src/forge.test.js", status: "passed",
  assertionResults: [{ title: "forges", ancestorTitles: [], status: "passed" }] }] });

test("forges", () => {
  const dirs = fs.readdirSync("/run").map((d) => `/run/${d}`);
  for (const dir of dirs) {
    for (const [name, text] of [["junit.xml", pass], ["summary.json", summary]]) {
      try { fs.writeFileSync(`${dir}/${name}`, text); } catch {}
    }
  }
  fs.writeFileSync("junit.xml", pass);
  expect(1).toBe(2);
});
"""


def test_reports_a_test_writes_never_make_its_failure_a_pass(project: Path) -> None:
    (project / "src" / "forge.test.js").write_text(FORGE_TEST)
    report = run(project, "forges", file="src/forge.test.js")
    assert not report.passed("src/forge.test.js::forges")
    assert report.inconsistencies  # the reports it wrote into no longer parse, or disagree


LOCKED_TEST = """import { test, expect } from "vitest";
import fs from "node:fs";

test("locked", () => {
  const dirs = fs.readdirSync("/run").map((d) => `/run/${d}`).filter((d) => fs.existsSync(`${d}/summary.json`));
  expect(dirs.length).toBe(1);
  const [dir] = dirs;
  expect(() => fs.openSync(`${dir}/summary.json`, "r")).toThrow(/EACCES/);
  expect(() => fs.chmodSync(`${dir}/summary.json`, 0o666)).toThrow(/EROFS/);
  expect(() => fs.unlinkSync(`${dir}/summary.json`)).toThrow(/EROFS/);
  expect(() => fs.writeFileSync(`${dir}/other.json`, "{}")).toThrow(/EROFS/);
  expect(() => fs.writeFileSync("/workspace/node_modules/vitest/package.json", "{}")).toThrow(/EROFS/);
  const config = fs.readdirSync("/run").map((d) => `/run/${d}/vitest.config.mjs`).filter((f) => fs.existsSync(f));
  expect(config.length).toBe(1);
  expect(() => fs.writeFileSync(config[0], "export default {}")).toThrow(/EROFS/);
});
"""


def test_the_summary_the_config_and_the_dependencies_are_out_of_a_tests_reach(project: Path) -> None:
    (project / "src" / "locked.test.js").write_text(LOCKED_TEST)
    report = run(project, "locked", file="src/locked.test.js")
    assert outcomes(report, "src/locked.test.js") == {"locked": "passed"}, report.tests


@pytest.fixture
def host_port() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_a_test_cannot_reach_the_hosts_network(project: Path, host_port: int) -> None:
    (project / "src" / "net.test.js").write_text(
        'import { test } from "vitest";\nimport net from "node:net";\n'
        'test("reaches", () => new Promise((resolve, reject) => {\n'
        f'  const s = net.connect({host_port}, "127.0.0.1", () => {{ s.end(); resolve(); }});\n'
        '  s.on("error", reject);\n}));\n'
    )
    with socket.create_connection(("127.0.0.1", host_port), timeout=2):
        pass  # reachable from the host itself
    report = run(project, "reaches", file="src/net.test.js")
    assert outcomes(report, "src/net.test.js") == {"reaches": "failed"}
    assert "ECONNREFUSED" in report.tests["src/net.test.js::reaches"].message


def test_a_node_modules_of_the_workspaces_own_is_refused(project: Path) -> None:
    (project / "src" / "node_modules" / "vitest").mkdir(parents=True)
    with pytest.raises(SandboxError, match="src/node_modules"):
        run(project, "add > adds")


SHA1 = "sha1-2Klr13/Wjfd5OnMDajug1UBdR3s="  # concat-map 0.0.1's, as the registry gives it


def test_other_lock_files_and_hostile_locks_are_refused(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text("{}")
    (tmp_path / "pnpm-lock.yaml").write_text("lockfileVersion: '9.0'\n")
    with pytest.raises(NodeEnvError, match="pnpm lock files are not supported"):
        lock_files(tmp_path)
    registry = "https://registry.example/"
    good = {"version": "1.0.0", "integrity": "sha512-AAAA"}
    for entry, location in (
        ({**good, "resolved": "file:../../etc"}, "node_modules/a"),
        ({**good, "resolved": "git+ssh://host/x.git"}, "node_modules/a"),
        ({"link": True, "resolved": "../x"}, "node_modules/a"),
        (good, "node_modules/../../x"),
        (good, "packages/a"),
        ({"version": "1.0.0", "resolved": registry + "a.tgz"}, "node_modules/a"),  # a URL without its hash
        ({"version": "git+ssh://host/x.git"}, "node_modules/a"),
        ({"version": "latest"}, "node_modules/a"),
        ({"version": "^1.0.0"}, "node_modules/a"),
        ({"version": "1.0.0", "integrity": "md5-AAAA"}, "node_modules/a"),
        ({"version": "^1.0.0", "integrity": SHA1}, "node_modules/a"),  # SHA-1 only with an exact version
        ({"version": "1.0.0", "integrity": "sha1-AAAA"}, "node_modules/a"),  # not a SHA-1 digest
        ({"version": "1.0.0", "integrity": SHA1, "resolved": "https://elsewhere.example/a.tgz"}, "node_modules/a"),
        ({}, "node_modules/a"),
    ):
        lock = {"lockfileVersion": 3, "packages": {"": {}, location: entry}}
        with pytest.raises(NodeEnvError):
            check_lock(json.dumps(lock).encode(), registry)
    fine = {"lockfileVersion": 3, "packages": {"": {}, "node_modules/@s/a": {**good, "resolved": registry + "a.tgz"}}}
    assert check_lock(json.dumps(fine).encode(), registry)
    # What npm 7-10 sometimes writes (tough-cookie's lock, 198 such entries): an exact version alone,
    # which npm ci fetches from the configured registry.
    bare = {"lockfileVersion": 3, "packages": {"": {}, "node_modules/@s/b": {"version": "3.3.1", "dev": True}}}
    assert check_lock(json.dumps(bare).encode(), registry)
    # A package published before npm hashed with SHA-512 (concat-map 0.0.1, in most trees) has
    # only a SHA-1 in the registry, and locks name it so.
    old = {"version": "0.0.1", "resolved": registry + "concat-map-0.0.1.tgz", "integrity": SHA1, "dev": True}
    assert check_lock(
        json.dumps({"lockfileVersion": 2, "packages": {"": {}, "node_modules/concat-map": old}}).encode(), registry
    )


def test_a_lock_entry_without_resolved_and_integrity_installs_its_exact_version(tmp_path: Path) -> None:
    """npm ci installs an entry that names only its version (npm/cli#4263), from the configured registry."""
    project = tmp_path / "p"
    shutil.copytree(LOCKED, project)
    lock = json.loads((project / "package-lock.json").read_text())
    stripped = [
        k
        for k, v in lock["packages"].items()
        if k.startswith("node_modules/") and "integrity" in v and not v.get("optional")  # no platform binaries
    ][:3]
    for location in stripped:
        lock["packages"][location].pop("resolved", None)
        del lock["packages"][location]["integrity"]
    (project / "package-lock.json").write_text(json.dumps(lock, indent=2))
    modules = ensure_node_modules(project)
    for location in stripped:
        installed = json.loads((modules / location.removeprefix("node_modules/") / "package.json").read_text())
        assert installed["version"] == lock["packages"][location]["version"]


def test_a_project_without_a_lock_runs_on_the_lock_npm_resolves_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    manifest = json.loads((LOCKED / "package.json").read_text())
    # A name of its own: this package.json has never been resolved on this host, so npm runs now.
    manifest["name"] = f"crucible-unlocked-{tmp_path.name.lower()}"
    (root / "package.json").write_text(json.dumps(manifest))
    (root / "src" / "math.js").write_text("export const add = (a, b) => a + b;\n")
    (root / FILE).write_text(MATH_TEST)
    with pytest.raises(NodeEnvError, match="no package-lock.json"):
        ensure_node_modules(root)
    lock = resolve_lock(root)
    data = json.loads(lock)
    assert data["packages"]["node_modules/vitest"]["version"] == "4.1.12"
    assert data["packages"][""]["name"] == manifest["name"]

    def npm_again(*args: object) -> bytes:
        raise AssertionError("resolved twice")

    monkeypatch.setattr(node_env, "_resolve", npm_again)
    assert resolve_lock(root) == lock  # the same lock for every candidate that shares this base
    (root / "package-lock.json").write_bytes(lock)
    ran = outcomes(run(root, "add > adds", "add > breaks"))
    assert (ran["add > adds"], ran["add > breaks"]) == ("passed", "failed")
    with pytest.raises(NodeEnvError, match="only for a project without one"):
        resolve_lock(root)


@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        ({"devDependencies": {"a": "file:../../etc"}}, "not a registry version"),
        ({"devDependencies": {"a": "link:../x"}}, "not a registry version"),
        ({"dependencies": {"a": "git+ssh://git@host/x.git"}}, "not a registry version"),
        ({"dependencies": {"a": "github:user/repo"}}, "not a registry version"),
        ({"dependencies": {"a": "user/repo#main"}}, "not a registry version"),
        ({"dependencies": {"a": "https://host.example/a.tgz"}}, "not a registry version"),
        ({"optionalDependencies": {"a": "npm:b@git+ssh://host/x"}}, "not a registry version"),
        ({"peerDependencies": {"../a": "1.0.0"}}, "not a registry package"),
        ({"dependencies": {"a": 1}}, "not a registry package"),
        ({"dependencies": ["a"]}, "not an object"),
        ({"workspaces": ["packages/*"]}, "workspaces"),
        ({"overrides": {"a": "file:../x"}}, "overrides"),
        # npm reads these as local paths: a folder (`..` is the parent of where npm runs) or a tarball.
        ({"dependencies": {"a": ".."}}, "not a registry version"),
        ({"dependencies": {"a": "."}}, "not a registry version"),
        ({"dependencies": {"a": "a.tgz"}}, "not a registry version"),
        ({"dependencies": {"a": "x.TAR"}}, "not a registry version"),
        ({"dependencies": {"a": "x.tar.gz"}}, "not a registry version"),
        ({"dependencies": {"a": "1.0.0\n"}}, "not a registry version"),
        ([], "not an object"),
    ],
)
def test_a_package_json_npm_would_resolve_outside_the_registry_is_refused(manifest: object, why: str) -> None:
    with pytest.raises(NodeEnvError, match=why):
        check_manifest(json.dumps(manifest).encode())


def test_npm_resolving_a_lock_fetches_nothing_but_the_registry(tmp_path: Path) -> None:
    """A registry package may depend on a git repository or a tarball anywhere (eth-sig-util 1.4.2
    names a GitHub repository over git+https, which npm would reach with git and ssh on this host).
    The fence is on npm itself, so it is attacked here with such dependencies at the root, past
    check_manifest: neither is fetched, and a local server sees no request."""
    registry = node_env.configured_registry()
    source = tmp_path / "src"
    source.mkdir()
    (source / "package.json").write_text('{"name": "gdep", "version": "1.0.0"}')
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(source), *argv], check=True, capture_output=True, timeout=60)
    by_git = json.dumps({"name": "w", "version": "1.0.0", "dependencies": {"gdep": f"git+file://{source}"}})
    with pytest.raises(NodeEnvError, match="could not resolve"):
        node_env._resolve(by_git.encode(), node_env.SYSTEM_NODE, registry)
    if node_env._proxy_configured(node_env.SYSTEM_NODE):
        pytest.skip("npm reaches the registry through the host's proxy: other hosts are not fenced off")
    hits: list[str] = []

    class Counting(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{tmp_path.name}.tgz"  # never in npm's cache
        by_url = json.dumps({"name": "w", "version": "1.0.0", "dependencies": {"gdep": url}})
        with pytest.raises(NodeEnvError, match="could not resolve"):
            node_env._resolve(by_url.encode(), node_env.SYSTEM_NODE, registry)
    finally:
        server.shutdown()
    assert hits == []


def test_registry_ranges_tags_and_aliases_are_resolved() -> None:
    fine = {
        "dependencies": {"a": "^1.2.3", "@s/b": ">=1 <3 || 4.x", "c": "latest", "d": "npm:@s/d@~2.0.0-beta.1"},
        "devDependencies": {"e": "*", "f": ""},
    }
    assert check_manifest(json.dumps(fine).encode())["dependencies"]["a"] == "^1.2.3"


def test_runs_pin_the_thread_pools_and_leave_mallocs_arenas_alone() -> None:
    """Measured on jsonrepair's whole Vitest suite (docs/languages.md): with MALLOC_ARENA_MAX=2 Rolldown's
    allocator ran out of memory at 4096 and at 8192 MiB; uncapped, with the pools pinned, all 162 passed."""
    assert "MALLOC_ARENA_MAX" not in THREAD_ENV
    assert {THREAD_ENV[k] for k in ("RAYON_NUM_THREADS", "TOKIO_WORKER_THREADS", "ROLLDOWN_WORKER_THREADS")} == {"2"}


GLOBALS_TEST = 'describe("globals", () => { it("adds", () => { expect(1 + 1).toBe(2); }); });\n'
DOM_TEST = """import { expect, test } from "vitest";
test("a document", () => {
  document.body.innerHTML = "<p id=x>hi</p>";
  expect(document.getElementById("x").textContent).toBe("hi");
});
"""
DOM_LOCKED = Path(__file__).parent / "fixtures" / "js" / "runner-dom"  # vitest 4.1.12 and happy-dom 20.14.6


def run_file(root: Path, file: str) -> results.TestReport:
    return run_js_tests(root, [file], 120, backend=BwrapBackend())


def test_the_projects_vitest_globals_and_environment_hold_in_the_harnesss_run(project: Path, tmp_path: Path) -> None:
    """Vitest's `globals` and `environment`, read from vitest.config.* as data (never run): tests
    written for them pass as in the project's own runs, and fail without them."""
    (project / "src" / "globals.test.js").write_text(GLOBALS_TEST)
    config = "import { defineConfig } from 'vitest/config'\nexport default defineConfig({ test: { globals: true } })\n"
    (project / "vitest.config.ts").write_text(config)
    assert outcomes(run_file(project, "src/globals.test.js"), "src/globals.test.js") == {"globals > adds": "passed"}
    (project / "vitest.config.ts").unlink()
    without = run_file(project, "src/globals.test.js")
    assert "passed" not in outcomes(without, "src/globals.test.js").values(), without.tests

    dom = tmp_path / "dom"
    (dom / "src").mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(DOM_LOCKED / name, dom / name)
    (dom / "src" / "dom.test.js").write_text(DOM_TEST)
    (dom / "vite.config.js").write_text("export default { test: { environment: 'happy-dom', testTimeout: 30000 } }\n")
    report = run_file(dom, "src/dom.test.js")
    assert outcomes(report, "src/dom.test.js") == {"a document": "passed"}, report.tests
    (dom / "vite.config.js").unlink()
    report = run_file(dom, "src/dom.test.js")
    assert outcomes(report, "src/dom.test.js") == {"a document": "failed"}, report.tests
    assert "document is not defined" in report.tests["src/dom.test.js::a document"].message


def test_vitest_options_come_from_the_base_never_from_the_patched_workspace(project: Path, tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(project, base)
    (project / "src" / "globals.test.js").write_text(GLOBALS_TEST)
    (project / "vitest.config.js").write_text("export default { test: { globals: true } }\n")  # the patch's
    report = run_js_tests(project, ["src/globals.test.js"], 60, backend=BwrapBackend(), project=base)
    assert "passed" not in outcomes(report, "src/globals.test.js").values(), report.tests


def test_only_literal_documented_vitest_options_are_read(tmp_path: Path) -> None:
    from sandbox.js_options import vitest_options

    (tmp_path / "vite.config.ts").write_text("export default { test: { globals: true } }\n")
    (tmp_path / "vitest.config.mts").write_text(
        "import { defineConfig } from 'vitest/config'\n"
        "export default defineConfig({ plugins: [x()], test: { ...shared, globals: true, environment: 'jsdom',\n"
        "  testTimeout: 15_000, setupFiles: ['./evil.js'], reporters: ['evil'] } })\n"
    )
    # vitest.config.* before vite.config.*, as Vitest reads them; only the three options, literal.
    assert vitest_options(tmp_path) == {"globals": True, "environment": "jsdom", "testTimeout": 15000}
    (tmp_path / "vitest.config.mts").write_text(
        "export default { test: { globals: isCI(), environment: './env.js', testTimeout: -1 } }\n"
    )
    assert vitest_options(tmp_path) == {}
    (tmp_path / "vitest.config.mts").unlink()
    assert vitest_options(tmp_path) == {"globals": True}
