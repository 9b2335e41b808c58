"""Jest projects' tests run in the sandbox (sandbox.js_run, runner=JEST): outcomes, and attacks on
the configuration and the reports that change nothing.

Each test copies the base of tests/fixtures/lang_tasks/js_jest_task_1 (jest 30.5.2 in its lock)
with its hidden test into a temporary directory. The lock is installed once per host, as is the
harness's own jest-junit (sandbox/js_harness/jest-junit); the first run needs the npm registry.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sandbox import results
from sandbox.backends.base import SandboxError
from sandbox.backends.bwrap import BwrapBackend
from sandbox.js_run import JEST_JUNIT_LOCK, run_js_tests
from sandbox.node_env import NODE, ensure_node_modules
from sandbox.outcomes_js import JsRunner

pytestmark = pytest.mark.skipif(
    not Path(NODE).exists() or shutil.which("npm") is None, reason="node or npm is not installed"
)
TASK = Path(__file__).parent.parent / "fixtures" / "lang_tasks" / "js_jest_task_1"
# jest 30.5.2, ts-jest 29.4.15 and typescript 5.9.3: a TypeScript project's lock.
TS_LOCKED = Path(__file__).parent / "fixtures" / "js" / "jest-ts"
# jest 26.6.3: the last Jest that ran tests in jsdom when a project named no environment.
JEST26_LOCKED = Path(__file__).parent / "fixtures" / "js" / "jest26"
FILE = "test/cents.test.js"
F2P, GROUPS, SUMS = "formatCents > pads cents below ten", "formatCents > groups thousands", "sums amounts"
# The base as it stands: the padding test fails, the other two pass.
HONEST = {F2P: "failed", GROUPS: "passed", SUMS: "passed"}


@pytest.fixture(scope="session")
def node_modules() -> Path:
    ensure_node_modules(JEST_JUNIT_LOCK)
    return ensure_node_modules(TASK / "repo_snapshot")


@pytest.fixture
def project(tmp_path: Path, node_modules: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(TASK / "repo_snapshot", root)
    (root / "test").mkdir()
    shutil.copy(TASK / "tests" / "cents.test.js", root / FILE)
    return root


def run(root: Path, *names: str, file: str = FILE) -> results.TestReport:
    ids = [f"{file}::{n}" for n in names] or [file]
    return run_js_tests(root, ids, 60, backend=BwrapBackend(), runner=JsRunner.JEST)


def outcomes(report: results.TestReport, file: str = FILE) -> dict[str, str]:
    return {k.removeprefix(f"{file}::"): str(v.outcome) for k, v in report.tests.items()}


def test_the_base_fails_and_the_expected_patch_passes(project: Path) -> None:
    base = run(project)
    assert outcomes(base) == HONEST and base.inconsistencies == [], base.inconsistencies
    assert base.exec.exit_code == 1 and 'Expected: "1.05"' in base.tests[f"{FILE}::{F2P}"].message
    subprocess.run(["git", "apply", "--directory", "", str(TASK / "expected_patch")], cwd=project, check=True)
    fixed = run(project, F2P, SUMS)
    assert outcomes(fixed) == {F2P: "passed", GROUPS: "skipped", SUMS: "passed"}
    assert fixed.exec.exit_code == 0 and fixed.valid
    assert not (project / "node_modules").exists()  # the mount point went with the run


ALL_PASS_SETUP = """// Loaded before the tests, every assertion would pass.
global.expect = () => new Proxy({}, { get: () => () => undefined });
"""
# A babel plugin that turns every expect(...) into an object whose matchers do nothing.
BABEL_PLUGIN = """module.exports = () => ({ visitor: { CallExpression(path) {
  if (path.node.callee.name === "expect") path.replaceWithSourceString("({ toBe() {}, toEqual() {} })");
} } });
"""
FAKE_REPORTER = """const fs = require("fs");
// Loaded as a reporter, it would write a passing report wherever it could.
module.exports = class { onRunComplete() {
  for (const d of fs.readdirSync("/run")) for (const f of ["junit.xml", "summary.json"]) {
    try { fs.writeFileSync(`/run/${d}/${f}`, "{}"); } catch {}
  }
  fs.writeFileSync("/workspace/reporter-ran", "");
} };
"""


def test_the_repositorys_jest_babel_and_jest_junit_settings_decide_nothing(project: Path) -> None:
    (project / "pass.js").write_text(ALL_PASS_SETUP)
    (project / "strip.js").write_text(BABEL_PLUGIN)
    (project / "fake-reporter.js").write_text(FAKE_REPORTER)
    forcing = {"setupFilesAfterEnv": ["<rootDir>/pass.js"], "reporters": ["<rootDir>/fake-reporter.js"]}
    (project / "jest.config.js").write_text(f"module.exports = {json.dumps({**forcing, 'testRegex': 'none'})};\n")
    (project / "babel.config.js").write_text('module.exports = { plugins: ["./strip.js"] };\n')
    (project / ".babelrc").write_text(json.dumps({"plugins": ["./strip.js"]}))
    package = json.loads((project / "package.json").read_text())
    junit = {"outputFile": "out.xml", "classNameTemplate": "{title}", "filePathPrefix": "x/"}
    (project / "package.json").write_text(json.dumps({**package, "jest": forcing, "jest-junit": junit}))
    report = run(project)
    assert outcomes(report) == HONEST and report.inconsistencies == [], report.inconsistencies
    assert not (project / "out.xml").exists() and not (project / "reporter-ran").exists()


FORGED_XML = (
    '<?xml version="1.0"?><testsuites><testsuite name="x" tests="1"><testcase classname="formatCents"'
    ' name="pads cents below ten" file="test/cents.test.js"/></testsuite></testsuites>'
)
FORGED_SUMMARY = {
    "success": True,
    "numPassedTests": 1,
    "numFailedTests": 0,
    "numPendingTests": 0,
    "numTodoTests": 0,
    "numTotalTests": 1,
    "testResults": [
        {
            "name": "/workspace/test/cents.test.js",
            "status": "passed",
            "assertionResults": [
                {"title": "pads cents below ten", "ancestorTitles": ["formatCents"], "status": "passed"}
            ],
        }
    ],
}
WRITES_REPORTS = f"""const fs = require("fs");
const forged = [["junit.xml", {json.dumps(FORGED_XML)}], ["summary.json", {json.dumps(json.dumps(FORGED_SUMMARY))}]];
for (const d of fs.readdirSync("/run")) for (const [name, text] of forged) {{
  try {{ fs.writeFileSync(`/run/${{d}}/${{name}}`, text); }} catch {{}}
}}
"""
PRINTS_REPORTS = f"""console.log({json.dumps(json.dumps(FORGED_SUMMARY))});
process.stdout.write({json.dumps(FORGED_XML)});
"""


def test_reports_a_test_writes_never_make_its_failure_a_pass(project: Path) -> None:
    test = project / FILE
    test.write_text(WRITES_REPORTS + test.read_text())
    report = run(project)
    assert not report.passed(f"{FILE}::{F2P}")
    assert report.inconsistencies  # the reports it wrote into no longer parse


def test_a_summary_a_test_prints_is_only_output(project: Path) -> None:
    test = project / FILE
    test.write_text(PRINTS_REPORTS + test.read_text())
    report = run(project)
    assert outcomes(report) == HONEST and report.inconsistencies == [], report.inconsistencies


LOCKED_TEST = """const fs = require("fs");

test("locked", () => {
  const dirs = fs.readdirSync("/run").map((d) => `/run/${d}`).filter((d) => fs.existsSync(`${d}/summary.json`));
  expect(dirs.length).toBe(1);
  for (const name of ["summary.json", "junit.xml"]) {
    expect(() => fs.openSync(`${dirs[0]}/${name}`, "r")).toThrow(/EACCES/);
    expect(() => fs.unlinkSync(`${dirs[0]}/${name}`)).toThrow(/EROFS/);
  }
  const config = fs.readdirSync("/run").map((d) => `/run/${d}/jest.config.json`).filter((f) => fs.existsSync(f));
  expect(config.length).toBe(1);
  expect(() => fs.writeFileSync(config[0], "{}")).toThrow(/EROFS/);
  expect(() => fs.writeFileSync("/workspace/node_modules/jest/package.json", "{}")).toThrow(/EROFS/);
  const junit = fs.readdirSync("/run").map((d) => `/run/${d}/node_modules/jest-junit/index.js`);
  expect(() => fs.writeFileSync(junit.find((f) => fs.existsSync(f)), "")).toThrow(/EROFS/);
});
"""


def test_the_reports_the_config_and_both_node_modules_are_out_of_a_tests_reach(project: Path) -> None:
    (project / "test" / "locked.test.js").write_text(LOCKED_TEST)
    report = run(project, "locked", file="test/locked.test.js")
    assert outcomes(report, "test/locked.test.js") == {"locked": "passed"}, report.tests


def test_a_typescript_test_without_ts_jest_is_refused(project: Path) -> None:
    (project / "test" / "typed.test.ts").write_text('test("typed", () => { const n: number = 1; });\n')
    with pytest.raises(SandboxError, match="only through ts-jest"):
        run(project, "typed", file="test/typed.test.ts")


TYPED_TEST = """import { describe, expect, test } from "@jest/globals";
import { half } from "./half.js";

describe("half", () => {
  test("halves", () => { const n: number = half(4); expect(n).toBe(2); });
  test("breaks", () => { expect(half(3)).toBe(1); });
});
"""


def test_a_typescript_test_runs_through_the_locks_ts_jest(tmp_path: Path) -> None:
    ensure_node_modules(JEST_JUNIT_LOCK)
    ensure_node_modules(TS_LOCKED)
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(TS_LOCKED / name, root / name)
    # An ES module source imports ./half.js, which TypeScript resolves to half.ts.
    (root / "src" / "half.ts").write_text("export const half = (n: number): number => n / 2;\n")
    (root / "src" / "half.test.ts").write_text(TYPED_TEST)
    report = run(root, file="src/half.test.ts")
    assert outcomes(report, "src/half.test.ts") == {"half > halves": "passed", "half > breaks": "failed"}, report.tests
    assert report.inconsistencies == [], report.inconsistencies


FROZEN_CLOCK_TEST = """test("the clock stands still", () => {
  const before = new Date();
  let spin = 0;
  for (let i = 0; i < 5e7; i++) spin += i;  // tens of ms of real time (performance.now is faked too)
  expect(new Date()).toEqual(before);
});

test("timers fire when advanced", () => {
  let fired = false;
  setTimeout(() => { fired = true; }, 10000);
  jest.advanceTimersByTime(10000);
  expect(fired).toBe(true);
});
"""


@pytest.mark.parametrize(
    ("config_file", "config"),
    [
        (
            "jest.config.js",
            "module.exports = {\n  testEnvironment: 'node',\n  fakeTimers: { enableGlobally: true },\n};\n",
        ),
        ("jest.config.ts", "const config: Config = { fakeTimers: { enableGlobally: true } }\nexport default config\n"),
    ],
)
def test_the_projects_global_fake_timers_hold_in_the_harnesss_run(project: Path, config_file: str, config: str) -> None:
    """Jest's `fakeTimers`, read from the project's config as data (its module is never run): tests
    written for a frozen clock pass, as in the project's own runs, on a machine of any speed."""
    (project / "test" / "clock.test.js").write_text(FROZEN_CLOCK_TEST)
    frozen = {"the clock stands still": "passed", "timers fire when advanced": "passed"}
    (project / config_file).write_text(config)
    report = run(project, file="test/clock.test.js")
    assert outcomes(report, "test/clock.test.js") == frozen, report.tests
    # Without the option, the same tests see the real clock: both fail.
    (project / config_file).unlink()
    real = run(project, file="test/clock.test.js")
    assert set(outcomes(real, "test/clock.test.js").values()) == {"failed"}, real.tests


def test_only_literal_documented_options_are_read(tmp_path: Path) -> None:
    from sandbox.js_options import jest_options

    (tmp_path / "jest.config.js").write_text(
        "const base = require('./base');\n"
        "module.exports = { ...base, fakeTimers: { enableGlobally: true, now: 1_000, advanceTimers: pick(),\n"
        "  doNotFake: ['nextTick'], timerLimit: 'x', setupFiles: ['evil.js'] }, testEnvironment: 'jsdom',\n"
        "  testTimeout: 2e4, setupFiles: ['evil.js'], reporters: ['evil'] };\n"
    )
    assert jest_options(tmp_path) == {
        "fakeTimers": {"enableGlobally": True, "now": 1000, "doNotFake": ["nextTick"]},
        "testEnvironment": "jsdom",
        "testTimeout": 20000,
    }
    # An environment by path would load a workspace file; a computed or unbounded value is not data.
    (tmp_path / "jest.config.js").write_text(
        "module.exports = { fakeTimers: makeTimers(), testEnvironment: './env.js', testTimeout: 1e9 };\n"
    )
    assert jest_options(tmp_path) == {}
    (tmp_path / "package.json").write_text(json.dumps({"jest": {"fakeTimers": {"doNotFake": ["fs.readFile"]}}}))
    assert jest_options(tmp_path) == {}  # not a fakeable API: the list is dropped, and nothing is left
    (tmp_path / "package.json").write_text(json.dumps({"jest": {"testEnvironment": "node", "testTimeout": True}}))
    assert jest_options(tmp_path) == {"testEnvironment": "node"}


DOM_TEST = """test("makes an element", () => {
  const p = document.createElement("p");
  p.textContent = "hi";
  expect(p.outerHTML).toBe("<p>hi</p>");
});
"""


def test_a_jest_26_project_that_names_no_environment_runs_in_jsdom_as_its_jest_did(tmp_path: Path) -> None:
    ensure_node_modules(JEST_JUNIT_LOCK)
    root = tmp_path / "repo"
    shutil.copytree(JEST26_LOCKED, root)
    (root / "test").mkdir()
    (root / "test" / "dom.test.js").write_text(DOM_TEST)
    report = run(root, file="test/dom.test.js")
    assert outcomes(report, "test/dom.test.js") == {"makes an element": "passed"}
    # The project's own choice stands: with `node` named, there is no document, as in its own run.
    manifest = json.loads((root / "package.json").read_text())
    (root / "package.json").write_text(json.dumps({**manifest, "jest": {"testEnvironment": "node"}}))
    report = run(root, file="test/dom.test.js")
    assert outcomes(report, "test/dom.test.js") == {"makes an element": "failed"}
    assert "document is not defined" in report.tests["test/dom.test.js::makes an element"].message


def test_only_jest_26_and_older_default_to_jsdom_by_the_locked_version(tmp_path: Path) -> None:
    from sandbox.js_options import jest_options

    for version, expected in (("26.6.3", {"testEnvironment": "jsdom"}), ("27.0.0", {}), ("30.5.2", {}), ("x", {})):
        lock = {"lockfileVersion": 3, "packages": {"": {}, "node_modules/jest": {"version": version}}}
        (tmp_path / "package-lock.json").write_text(json.dumps(lock))
        assert jest_options(tmp_path) == expected, version
    (tmp_path / "package-lock.json").write_text("not json")
    assert jest_options(tmp_path) == {}


def test_fake_timers_come_from_the_base_never_from_the_patched_workspace(project: Path, tmp_path: Path) -> None:
    """A patch that adds its own jest.config.js cannot choose the clock the hidden tests run on."""
    base = tmp_path / "base"
    shutil.copytree(TASK / "repo_snapshot", base)  # the task's base: no fakeTimers anywhere
    (project / "test" / "clock.test.js").write_text(FROZEN_CLOCK_TEST)
    (project / "jest.config.js").write_text("module.exports = { fakeTimers: { enableGlobally: true } };\n")
    ids = [f"test/clock.test.js::{n}" for n in ("the clock stands still", "timers fire when advanced")]
    report = run_js_tests(project, ids, 60, backend=BwrapBackend(), runner=JsRunner.JEST, project=base)
    assert set(outcomes(report, "test/clock.test.js").values()) == {"failed"}, report.tests


def test_the_projects_environment_and_time_limit_reach_the_harnesss_config(tmp_path: Path) -> None:
    from sandbox.js_run import jest_config

    options = {"testEnvironment": "jsdom", "testTimeout": 20000}
    config = json.loads(jest_config(["a.test.js"], None, tmp_path, "/r/jest-junit", options))
    assert config["testEnvironment"] == "jsdom" and config["testTimeout"] == 20000
    assert json.loads(jest_config(["a.test.js"], None, tmp_path, "/r/jest-junit"))["testEnvironment"] == "node"
