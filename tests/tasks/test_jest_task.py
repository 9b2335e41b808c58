"""A JavaScript task's runner is chosen from its base's package.json (tasks.lang_tests.js_runner), and a
Jest task (tests/fixtures/lang_tasks/js_jest_task_1, jest 30.5.2 in its lock) is scored with Jest.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rewards.scoring import score_patch
from rewards.spec import load_spec
from sandbox.backends.base import SandboxError
from sandbox.node_env import NODE
from sandbox.outcomes_js import JsRunner
from tasks.lang_tests import js_runner, runner_name
from tasks.spec import TaskSpec

TASK = Path(__file__).parent.parent / "fixtures" / "lang_tasks" / "js_jest_task_1"


def base_with(tmp_path: Path, manifest: object) -> Path:
    (tmp_path / "package.json").write_text(json.dumps(manifest))
    return tmp_path


@pytest.mark.parametrize(
    ("manifest", "runner"),
    [
        ({"devDependencies": {"vitest": "4.1.12"}}, JsRunner.VITEST),
        ({"devDependencies": {"jest": "30.5.2", "jest-junit": "17.0.0"}}, JsRunner.JEST),
        ({"dependencies": {"jest": "29.4.3"}}, JsRunner.JEST),
        ({"devDependencies": {"jest": "29.0.0", "vitest": "4.1.12"}}, JsRunner.VITEST),
    ],
)
def test_the_runner_is_the_one_the_base_depends_on(tmp_path: Path, manifest: object, runner: JsRunner) -> None:
    assert js_runner(base_with(tmp_path, manifest)) == runner


@pytest.mark.parametrize(
    ("manifest", "named"),
    [
        ({"devDependencies": {"mocha": "10.0.0", "chai": "4.0.0"}}, "mocha"),
        ({"devDependencies": {"ava": "6.0.0", "tap": "18.0.0"}}, "ava, tap"),
        ({"scripts": {"test": "jest"}}, "none"),
        ([], "none"),
    ],
)
def test_any_other_runner_is_refused_by_name(tmp_path: Path, manifest: object, named: str) -> None:
    with pytest.raises(SandboxError, match=f"test runners found: {named}\\)"):
        js_runner(base_with(tmp_path, manifest))


def test_a_base_without_a_readable_package_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a plain file"):
        js_runner(tmp_path)
    (tmp_path / "package.json").write_text("{")
    with pytest.raises(SandboxError, match="not JSON"):
        js_runner(tmp_path)


@pytest.mark.skipif(not Path(NODE).exists() or shutil.which("npm") is None, reason="node or npm is not installed")
def test_the_jest_tasks_expected_patch_scores_one_and_a_patch_to_its_runner_changes_nothing() -> None:
    spec = TaskSpec.from_task_dir(TASK)
    assert runner_name(spec) == "jest"
    honest = score_patch(spec, spec.expected_patch, load_spec(), backend="bwrap")
    assert (honest.reward, honest.resolved, honest.f2p_passed, honest.p2p_passed) == (1.0, True, 1, 2), honest.flags
    # A patch that makes the base's package.json name Vitest: the runner stays the base's.
    package = json.loads((TASK / "repo_snapshot" / "package.json").read_text())
    text = json.dumps({**package, "devDependencies": {"vitest": "4.1.12"}}, indent=2) + "\n"
    lines = [f"+{line}" for line in text.splitlines()]
    old = (TASK / "repo_snapshot" / "package.json").read_text().splitlines()
    patch = (
        "diff --git a/package.json b/package.json\n--- a/package.json\n+++ b/package.json\n"
        f"@@ -1,{len(old)} +1,{len(lines)} @@\n" + "".join(f"-{line}\n" for line in old) + "\n".join(lines) + "\n"
    )
    empty = score_patch(spec, patch, load_spec(), backend="bwrap")
    assert (empty.reward, empty.f2p_passed, empty.p2p_passed) == (0.0, 0, 2), empty.flags
    assert empty.breakdown["test_run_valid"] is True
    assert empty.breakdown["lang"]["restored_from_base"] == ["package.json"]
    assert empty.breakdown["lang"]["runner"] == "jest"  # the base's runner, recorded with the score
