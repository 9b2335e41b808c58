"""Synthetic bugs in Go and JavaScript/TypeScript code, checked by mutation, as tasks.builders.synthetic
makes them in Python: a mutant becomes a task only when the repository's own tests notice it (a test
that passes on the original fails on the mutant, and the run is believed). The expected patch is the
reverse change; the statement is the failing tests' messages, never the change.

The mutations are one binary operator flipped where gofmt and JavaScript style space it (` < ` to
` <= `, ` == ` to ` != `, ` && ` to ` || `, ...), outside comments and strings, in code files only
(not tests, test data, vendored or tooling files). A lexer, not a parser: a site it misreads gives a
mutant that does not build, which no test run believes, so it is never kept.
"""

from __future__ import annotations

import random
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.vocabulary import TaskSource
from patches import render, text_patch
from sandbox import Limits
from sandbox.backends.base import Backend, SandboxError
from sandbox.go_run import run_go_tests
from sandbox.go_toolchains import toolchain_for
from sandbox.js_run import run_js_tests
from sandbox.node_env import NodeEnvError
from sandbox.node_versions import choose_node, node_metadata, node_toolchain
from sandbox.results import Outcome, TestReport
from tasks.builders import lang_history, lang_logs
from tasks.builders.common import BuildError, common_dir, task_slug, write_task_dir
from tasks.lang_tests import GO, js_runner

_OPERATOR = re.compile(r"(?<=[ \t])(===|!==|==|!=|<=|>=|&&|\|\||<|>)(?=[ \t])")
FLIPS = {
    "<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==",
    "===": "!==", "!==": "===", "&&": "||", "||": "&&",
}  # fmt: skip
MAX_FILE_BYTES = 256 * 1024
RUN_TIMEOUT_S = 120
MAX_MESSAGE = 300
JS_MEMORY_MB = 4096


@dataclass(frozen=True)
class LangMutant:
    path: str
    offset: int
    before: str
    after: str

    def apply(self, text: str) -> str:
        return text[: self.offset] + self.after + text[self.offset + len(self.before) :]


def code_mask(text: str) -> list[bool]:
    """For each character, whether it is code: False inside comments and string, rune and template literals."""
    mask = [True] * len(text)
    i, n = 0, len(text)
    while i < n:
        two = text[i : i + 2]
        if two in ("//", "/*"):
            end = text.find("\n" if two == "//" else "*/", i + 2)
            end = n if end < 0 else end + (0 if two == "//" else 2)
        elif text[i] in "\"'`":
            end = i + 1
            while end < n and text[end] != text[i] and not (text[i] != "`" and text[end] == "\n"):
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
        else:
            i += 1
            continue
        mask[i:end] = [False] * (end - i)
        i = end
    return mask


def mutants(root: Path, language: str) -> list[LangMutant]:
    """Every operator site of the tree's code files, in a stable order."""
    found = []
    for path in sorted(lang_history.walk(root, language)):
        rel = path.relative_to(root).as_posix()
        code = lang_history.is_code(language, rel) and not lang_history.is_tooling(language, rel)
        if not code or path.stat().st_size > MAX_FILE_BYTES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        mask = code_mask(text)
        for match in _OPERATOR.finditer(text):
            if mask[match.start()]:
                found.append(LangMutant(rel, match.start(), match.group(1), FLIPS[match.group(1)]))
    return found


def run_all(tree: Path, language: str, backend: Backend) -> TestReport:
    """Every test of the tree, in the sandbox, with the runner validation uses."""
    ids = lang_history.all_test_ids(tree, language)
    if not ids:
        raise BuildError("the repository has no test the runner can find")
    if language == GO:
        toolchain = toolchain_for(lang_history.tree_go_toolchain(tree).get("go_toolchain"))
        return run_go_tests(tree, ids, RUN_TIMEOUT_S, backend=backend, toolchain=toolchain)
    limits = Limits(memory_mb=JS_MEMORY_MB)
    node = node_toolchain(choose_node(tree))
    return run_js_tests(tree, ids, RUN_TIMEOUT_S, backend=backend, limits=limits, runner=js_runner(tree), node=node)


def synthesize_lang(
    repo: Path,
    language: str,
    count: int,
    seed: int,
    out: Path,
    backend: Backend,
    name: str,
    progress: Callable[[int, int], None] | None = None,
    max_tries: int = 0,
) -> list[Path]:
    """Up to `count` tasks from single-operator mutants of `repo` that its tests notice."""
    try:
        original = run_all(repo, language, backend)
    except (SandboxError, NodeEnvError) as exc:
        raise BuildError(f"the repository's tests could not be run: {exc}") from None
    passing = {t for t, result in original.tests.items() if result.outcome == Outcome.PASSED}
    if not original.valid or not passing:
        raise BuildError("the repository's tests do not run cleanly on the original (no passing test to kill)")
    candidates = mutants(repo, language)
    random.Random(seed).shuffle(candidates)
    built: list[Path] = []
    tries = 0
    for mutant in candidates[: max_tries or count * 8]:
        tries += 1
        task = _try(repo, language, mutant, passing, out, backend, name)
        if task is not None:
            built.append(task)
        if progress is not None:
            progress(len(built), tries)
        if len(built) >= count:
            break
    return built


def _try(
    repo: Path, language: str, mutant: LangMutant, passing: set[str], out: Path, backend: Backend, name: str
) -> Path | None:
    original = (repo / mutant.path).read_text(encoding="utf-8", errors="replace")
    mutated = mutant.apply(original)
    with tempfile.TemporaryDirectory(prefix="crucible-lang-mutant-") as tmp:
        tree = Path(tmp) / "repo"
        shutil.copytree(repo, tree, symlinks=True, ignore=shutil.ignore_patterns("node_modules", ".git"))
        (tree / mutant.path).write_text(mutated, encoding="utf-8")
        try:
            report = run_all(tree, language, backend)
        except (SandboxError, NodeEnvError):
            return None
        killed = sorted(t for t in passing if report.outcome(t) == Outcome.FAILED)
        if not report.valid or report.exec.timed_out or not killed:
            return None  # unnoticed, not believed, or a mutant that does not build
        files = lang_logs.hidden_files(tree, killed, language)
        hidden = {f: (tree / f).read_bytes() for f in files}
        patch = text_patch(mutant.path, mutated, original)
        assert patch is not None
        # What failed, not which test: a test's name would tell the answer (validation refuses it).
        messages = list(dict.fromkeys(m[:MAX_MESSAGE] for t in killed[:5] if (m := report.tests[t].message)))
        statement = (
            "# Tests fail after a recent change\n\nThese tests passed before and fail now; find the cause in the "
            "code and fix it (the tests are right).\n\n```\n"
            + ("\n".join(messages) or "(no message)").replace("```", "'''")
            + "\n```\n"
        )
        metadata = {
            "source": TaskSource.SYNTHETIC_MUTATION,
            "repo": name,
            "language": language,
            **node_metadata(tree, language),
            **(lang_history.tree_go_toolchain(tree) if language == GO else {}),
            "fail_to_pass": killed[:50],
            "tags": ["synthetic", f"flip {mutant.before}"],
        }
        task_id = f"{task_slug(name)}-mut-{mutant.path.replace('/', '_')}-{mutant.offset}"[:120]
        dest = lang_history.tests_dest(language, common_dir(files))
        return write_task_dir(out, task_id, statement, tree, hidden, dest, render([patch]), metadata)
