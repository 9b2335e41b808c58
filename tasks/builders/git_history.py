"""Historical task reconstruction (seed §3.1): commits that change code and tests.

Base = the commit's parent; expected patch = its non-test diff; hidden tests = its test
files as the commit left them; statement = the commit message, or the issue it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.vocabulary import TaskSource
from patches import is_test_path
from tasks.builders.common import BuildError, common_dir, export_tree, git, write_task_dir

ISSUE_REF = re.compile(r"#(\d+)")
HASHES = re.compile(r"\b[0-9a-f]{7,40}\b")


@dataclass(frozen=True)
class Candidate:
    commit: str
    parent: str
    subject: str
    body: str
    code_files: tuple[str, ...]
    test_files: tuple[str, ...]
    changed_lines: int


def candidates(repo: Path, max_files: int = 10, max_lines: int = 400) -> list[Candidate]:
    """Non-merge commits, oldest first, that change both non-test code and tests, within size limits."""
    if not (repo / ".git").exists() and not (repo / "HEAD").exists():
        raise BuildError(f"{repo}: not a git repository")
    log = git(repo, "log", "--reverse", "--no-merges", "--format=%x00%H %P%x01%s%x01%b%x02", "--numstat").decode(
        "utf-8", "replace"
    )
    found = []
    for record in log.split("\x00")[1:]:
        header, _, stats = record.partition("\x02")
        ids, subject, body = (header.split("\x01") + ["", ""])[:3]
        parts = ids.split()
        if len(parts) != 2:
            continue  # the root commit (no parent) or a merge
        files, lines = [], 0
        for row in stats.strip().splitlines():
            added, removed, path = (row.split("\t") + ["", "", ""])[:3]
            files.append(path)
            lines += int(added) if added.isdigit() else 0
            lines += int(removed) if removed.isdigit() else 0
        tests = tuple(f for f in files if is_test_path(f, "tests") and f.endswith(".py"))
        code = tuple(f for f in files if f not in tests and f.endswith(".py"))
        if tests and code and len(files) <= max_files and lines <= max_lines:
            found.append(Candidate(parts[0], parts[1], subject.strip(), body.strip(), code, tests, lines))
    return found


def statement_for(candidate: Candidate, issues: dict[str, Any]) -> str:
    ref = ISSUE_REF.search(candidate.subject)
    issue = issues.get(ref.group(1)) if ref else None
    if isinstance(issue, dict) and issue.get("body"):
        text = f"# {issue.get('title') or candidate.subject}\n\n{issue['body']}"
    else:
        subject = ISSUE_REF.sub("", candidate.subject).replace("()", "").strip()
        text = f"# {subject}\n\n{candidate.body}" if candidate.body else f"# {subject}\n"
    # Commit hashes would point an agent at the answer in some other clone.
    return HASHES.sub("<commit>", text)


def build_task(
    repo: Path, candidate: Candidate, out: Path, issues: dict[str, Any], repo_name: str, license_id: str = ""
) -> Path:
    snapshot = out / ".snapshots" / candidate.parent
    if not snapshot.exists():
        export_tree(repo, candidate.parent, snapshot)
    hidden = {}
    for path in candidate.test_files:
        try:
            hidden[path] = git(repo, "show", f"{candidate.commit}:{path}")
        except BuildError:
            continue  # deleted by the commit: nothing to run
    if not hidden:
        raise BuildError(f"{candidate.commit[:8]}: the commit deletes its tests")
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
        *candidate.code_files,
    ).decode("utf-8", "replace")
    task_id = f"{repo_name}-{candidate.commit[:10]}"
    metadata = {
        "source": TaskSource.GIT_HISTORY,
        "repo": repo_name,
        "base_commit": candidate.parent,
        "test_command": "python -m pytest -q",
        "tags": ["git_history"],
        **({"license": license_id} if license_id else {}),
    }
    return write_task_dir(
        out, task_id, statement_for(candidate, issues), snapshot, hidden, common_dir(list(hidden)), patch, metadata
    )
