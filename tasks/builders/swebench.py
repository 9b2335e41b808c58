"""SWE-bench instances (JSONL) to task directories, given a local clone per repository."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.vocabulary import TaskSource
from patches import PatchError, parse
from sandbox.node_versions import choice_from_metadata
from tasks.builders.common import BuildError, common_dir, export_tree, git, write_task_dir
from tasks.builders.lang_history import ensure_lock
from tasks.lang_tests import PYTHON, go_toolchain_of, language_of

REQUIRED = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement")


def _test_list(value: Any, where: str) -> list[str]:
    """FAIL_TO_PASS / PASS_TO_PASS come as lists or as JSON-encoded lists."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise BuildError(f"{where} is not a JSON list") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BuildError(f"{where} must be a list of test ids")
    return value


def _language(record: dict[str, Any], where: str) -> dict[str, str]:
    """The metadata a row's `language` gives (Multi-SWE-bench's field, our export's): a Go or
    JavaScript task names it and runs its own runner, so the row's test_cmd is not its command."""
    try:
        language = language_of({"language": record.get("language") or PYTHON})
        release = go_toolchain_of({"language": language, "go_toolchain": record.get("go_toolchain")})
    except ValueError as exc:
        raise BuildError(f"{where}: {exc}") from None
    if language == PYTHON:
        return {"test_command": record.get("test_cmd") or "python -m pytest -q"}
    return {"language": language, **({"go_toolchain": release} if release else {})}


def _node(record: dict[str, Any], where: str) -> dict[str, Any]:
    """The Node a JavaScript row records (our export's `node`), checked as a task's metadata is."""
    if record.get("node") is None:
        return {}
    try:
        choice = choice_from_metadata({"language": record.get("language") or PYTHON, "node": record["node"]})
    except ValueError as exc:
        raise BuildError(f"{where}: {exc}") from None
    return {"node": choice.to_json()} if choice else {}


def _lock(record: dict[str, Any], where: str, snapshot: Path) -> dict[str, str]:
    """A JavaScript base without a lock file gets the row's `package_lock` (our export's: the lock
    validation ran with), else npm's resolution now; the metadata that says so."""
    given = record.get("package_lock")
    if given is not None and not isinstance(given, str):
        raise BuildError(f"{where}: package_lock must be the text of a package-lock.json")
    language = _language(record, where).get("language", PYTHON)
    return ensure_lock(snapshot, language, given.encode() if given is not None else None)


def read_instances(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BuildError(f"{path}: line {lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise BuildError(f"{path}: line {lineno}: an instance must be a JSON object")
            missing = [k for k in REQUIRED if not isinstance(record.get(k), str) or not record[k]]
            if missing:
                raise BuildError(f"{path}: line {lineno}: missing or empty {', '.join(missing)}")
            yield lineno, record


def clone_for(repos_dir: Path, repo: str) -> Path:
    """owner/name -> REPOS/owner__name, REPOS/owner/name or REPOS/name, whichever exists."""
    owner, _, name = repo.partition("/")
    for candidate in (repos_dir / f"{owner}__{name}", repos_dir / owner / name, repos_dir / (name or owner)):
        if (candidate / ".git").exists() or (candidate / "HEAD").exists():
            return candidate
    raise BuildError(f"no local clone of {repo} under {repos_dir} (tried {owner}__{name}, {repo}, {name or owner})")


def build_task(record: dict[str, Any], lineno: int, repos_dir: Path, out: Path) -> Path:
    where = f"line {lineno} ({record['instance_id']})"
    clone = clone_for(repos_dir, record["repo"])
    try:
        test_files = [p.path for p in parse(record["test_patch"], recount=True) if p.new_path]
    except PatchError as exc:
        raise BuildError(f"{where}: test_patch is not a readable diff: {exc}") from None
    if not test_files:
        raise BuildError(f"{where}: test_patch adds or changes no test file")
    with tempfile.TemporaryDirectory(prefix="crucible-swebench-") as tmp:
        snapshot = Path(tmp) / "snapshot"
        try:
            export_tree(clone, record["base_commit"], snapshot)
            lock = _lock(record, where, snapshot)
        except BuildError as exc:
            raise BuildError(f"{where}: {exc}") from None
        # The hidden tests are the test files as test_patch leaves them.
        work = Path(tmp) / "with_tests"
        shutil.copytree(snapshot, work)
        git(work, "init", "-q")
        try:
            git(work, "apply", "--whitespace=nowarn", "-", input=record["test_patch"].encode())
        except BuildError as exc:
            raise BuildError(f"{where}: test_patch does not apply at base_commit: {exc}") from None
        hidden = {path: (work / path).read_bytes() for path in test_files}
        metadata = {
            "source": TaskSource.ISSUE_PR,
            "repo": record["repo"],
            "base_commit": record["base_commit"],
            **_language(record, where),
            **_node(record, where),
            **lock,
            "fail_to_pass": _test_list(record.get("FAIL_TO_PASS"), f"{where}: FAIL_TO_PASS"),
            "pass_to_pass": _test_list(record.get("PASS_TO_PASS"), f"{where}: PASS_TO_PASS"),
            "tags": ["swe-bench"],
            **({"version": record["version"]} if isinstance(record.get("version"), str) else {}),
        }
        task_id = record["instance_id"].replace("/", "__")
        return write_task_dir(
            out,
            task_id,
            record["problem_statement"],
            snapshot,
            hidden,
            common_dir(test_files),
            record["patch"],
            metadata,
        )


def build_all(path: Path, repos_dir: Path, out: Path) -> list[Path]:
    """Every instance, or none: the first bad line stops the build before any import."""
    return [build_task(record, lineno, repos_dir, out) for lineno, record in read_instances(path)]
