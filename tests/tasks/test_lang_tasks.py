"""A Go task and a JavaScript (Vitest) task go through import, validation and scoring as a Python task does.

The task directories are in tests/fixtures/lang_tasks; their metadata names `"language"`, and
tasks.lang_tests runs their hidden tests with sandbox.go_run / sandbox.js_run. The JavaScript one
uses the lock pinned in tests/sandbox/fixtures/js/runner (vitest 4.1.12), installed once per host.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from rewards.scoring import Score, score_patch
from rewards.spec import load_spec
from sandbox.backends.base import SandboxError
from sandbox.backends.local import ALLOW_ENV
from sandbox.node_env import NODE
from tasks.models import Task
from tasks.services import import_task_dirs, task_spec_for, validate_task
from tasks.spec import TaskSpec
from tasks.taskdir import TaskDirError

pytestmark = pytest.mark.django_db
TASKS = Path(__file__).parent.parent / "fixtures" / "lang_tasks"
SPEC = load_spec()

WEAK_GO_TEST = """package textutil

import "testing"

func TestReverse(t *testing.T)                  {}
func TestTruncateASCII(t *testing.T)            {}
func TestTruncateCountsCharacters(t *testing.T) {}
"""
WEAK_JS_TEST = """import { describe, test } from "vitest";

describe("slugify", () => {
  test("lower-cases a single word", () => {});
  test("joins words with single dashes", () => {});
});
test("counts words", () => {});
"""
# Loaded, it would fail every run: a score of 1 with it in the patch shows it never was.
THROWING_CONFIG = 'throw new Error("the repository\'s config was loaded");\nexport default {};\n'
GO_MOD_REPLACED = """module example.com/textkit

go 1.19

require example.com/evil v1.0.0

replace example.com/evil => ./evil
"""


@dataclass(frozen=True)
class Lang:
    task_id: str
    language: str
    f2p: tuple[str, ...]
    p2p: tuple[str, ...]
    # The hidden test file, as a patch would write it (the base has none there).
    hidden_test: tuple[str, str]
    # Runner files a patch may try to change, and the names put back from the base.
    runner_files: dict[str, str]
    restored: tuple[str, ...]


GO = Lang(
    "go_task_1",
    "go",
    ("example.com/textkit/textutil::TestTruncateCountsCharacters",),
    ("example.com/textkit/textutil::TestReverse", "example.com/textkit/textutil::TestTruncateASCII"),
    ("textutil/textutil_test.go", WEAK_GO_TEST),
    {"go.mod": GO_MOD_REPLACED, "evil/evil.go": "package evil\n"},
    ("go.mod",),
)
JS = Lang(
    "js_task_1",
    "javascript",
    ("test/slug.test.js::slugify > joins words with single dashes",),
    ("test/slug.test.js::slugify > lower-cases a single word", "test/slug.test.js::counts words"),
    ("test/slug.test.js", WEAK_JS_TEST),
    {
        "vitest.config.js": THROWING_CONFIG,
        "vite.config.js": THROWING_CONFIG,
        "package.json": json.dumps({"name": "x", "type": "module", "vitest": {"setupFiles": ["./nope.js"]}}),
    },
    ("package.json",),
)


def _available(lang: Lang) -> bool:
    if lang is GO:
        return shutil.which("go") is not None or Path("/usr/bin/go").exists()
    return Path(NODE).exists() and shutil.which("npm") is not None


LANGS = [
    pytest.param(lang, id=lang.language, marks=pytest.mark.skipif(not _available(lang), reason="no runner"))
    for lang in (GO, JS)
]


def imported(lang: Lang, tmp_path: Path) -> Task:
    dest = tmp_path / "tasks" / lang.task_id
    shutil.copytree(TASKS / lang.task_id, dest)
    import_task_dirs(dest, "lang")
    return Task.objects.get(task_id=lang.task_id)


def diff(lang: Lang, tmp_path: Path, files: dict[str, str], fixed: bool = False) -> str:
    """A git diff of the base snapshot with `files` written (and the expected fix applied if `fixed`)."""
    repo = tmp_path / "diff"
    shutil.copytree(TASKS / lang.task_id / "repo_snapshot", repo)
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    if fixed:
        subprocess.run([*git, "apply", str(TASKS / lang.task_id / "expected_patch")], check=True)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run([*git, "add", "-A"], check=True)
    return subprocess.run([*git, "diff", "--cached"], check=True, capture_output=True, text=True).stdout


def scored(spec: TaskSpec, patch: str) -> Score:
    return score_patch(spec, patch, SPEC, backend="bwrap")


@pytest.mark.parametrize("lang", LANGS)
def test_the_task_imports_with_its_language(lang: Lang, tmp_path: Path) -> None:
    task = imported(lang, tmp_path)
    spec = task_spec_for(task)
    assert task.metadata["language"] == spec.language == lang.language
    assert (spec.fail_to_pass, spec.pass_to_pass) == (lang.f2p, lang.p2p)
    assert TaskSpec.from_task_dir(TASKS / lang.task_id).language == lang.language


def test_an_unknown_language_is_refused_at_import(tmp_path: Path) -> None:
    dest = tmp_path / "tasks" / "go_task_1"
    shutil.copytree(TASKS / "go_task_1", dest)
    meta = json.loads((dest / "metadata.json").read_text())
    (dest / "metadata.json").write_text(json.dumps({**meta, "language": "rust"}))
    with pytest.raises(TaskDirError, match="language must be one of"):
        import_task_dirs(dest, "lang")


@pytest.mark.parametrize("lang", LANGS)
def test_the_task_validates_and_its_lists_are_computed(lang: Lang, tmp_path: Path) -> None:
    def drop_lists(d: Path) -> None:
        meta = json.loads((d / "metadata.json").read_text())
        del meta["fail_to_pass"], meta["pass_to_pass"]
        (d / "metadata.json").write_text(json.dumps(meta))

    dest = tmp_path / "tasks" / lang.task_id
    shutil.copytree(TASKS / lang.task_id, dest)
    drop_lists(dest)
    import_task_dirs(dest, "lang")
    task = Task.objects.get(task_id=lang.task_id)
    report = validate_task(task, runs=2)
    task.refresh_from_db()
    assert report.status == task.validation_status == "valid", task.validation_report["reasons"]
    # Failing before the fix and passing after it, as the task's own runner reports it.
    assert task.fail_to_pass == list(lang.f2p)
    assert sorted(task.pass_to_pass) == sorted(lang.p2p)


@pytest.mark.parametrize("lang", LANGS)
def test_a_task_whose_fix_does_not_fix_is_invalid(lang: Lang, tmp_path: Path) -> None:
    task = imported(lang, tmp_path)
    task.expected_patch = diff(lang, tmp_path, {"README.md": "changed\n"})
    task.save()
    report = validate_task(task, runs=1)
    assert report.status == "invalid"
    assert any(c.name == "fail_to_pass_matches" and not c.ok for c in report.checks)


@pytest.mark.parametrize("lang", LANGS)
def test_the_expected_patch_scores_one_and_the_empty_patch_zero(lang: Lang, tmp_path: Path) -> None:
    spec = task_spec_for(imported(lang, tmp_path))
    honest = scored(spec, spec.expected_patch)
    assert (honest.reward, honest.resolved) == (1.0, True), honest.flags
    assert (honest.f2p_passed, honest.p2p_passed) == (len(lang.f2p), len(lang.p2p))
    assert honest.breakdown["lang"]["language"] == lang.language
    assert honest.breakdown["lang"]["runner"] == ("go test" if lang.language == "go" else "vitest")
    empty = scored(spec, "")
    assert (empty.reward, empty.resolved) == (0.0, False)
    assert (empty.f2p_passed, empty.p2p_passed) == (0, len(lang.p2p)), empty.flags
    assert empty.breakdown["test_run_valid"] is True


@pytest.mark.parametrize("lang", LANGS)
def test_a_patch_that_rewrites_the_hidden_test_file_does_not_score(lang: Lang, tmp_path: Path) -> None:
    spec = task_spec_for(imported(lang, tmp_path))
    path, weak = lang.hidden_test
    score = scored(spec, diff(lang, tmp_path, {path: weak}))
    assert score.reward < 1.0 and not score.resolved
    assert score.f2p_passed == 0
    assert path in score.breakdown["files"]["new_tests_set_aside"] + score.breakdown["files"]["protected_set_aside"]


@pytest.mark.parametrize("lang", LANGS)
def test_runner_files_in_a_patch_do_not_change_the_outcome(lang: Lang, tmp_path: Path) -> None:
    spec = task_spec_for(imported(lang, tmp_path))
    with_fix = scored(spec, diff(lang, tmp_path, lang.runner_files, fixed=True))
    assert (with_fix.reward, with_fix.resolved) == (1.0, True), with_fix.flags
    assert tuple(with_fix.breakdown["lang"]["restored_from_base"]) == lang.restored
    without = scored(spec, diff(lang, tmp_path / "bare", lang.runner_files))
    assert (without.reward, without.f2p_passed) == (0.0, 0)
    assert without.breakdown["test_run_valid"] is True


def test_a_backend_that_cannot_run_them_is_an_error_never_a_score(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_ENV, "1")
    spec = TaskSpec.from_task_dir(TASKS / "go_task_1")
    with pytest.raises(SandboxError, match="need the bwrap backend"):
        score_patch(spec, spec.expected_patch, SPEC, backend="local")
