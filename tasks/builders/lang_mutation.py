"""Synthetic bugs in Go and JavaScript/TypeScript code, checked by mutation, as tasks.builders.synthetic
makes them in Python: a mutant becomes a task only when the repository's own tests notice it (a test
that passes on the original fails on the mutant, and the run is believed). The expected patch is the
reverse change; the statement is the failing tests' messages, never the change.

The mutations are one binary operator flipped (`<` to `<=`, `==` to `!=`, `===` to `!==`, `&&` to
`||`, ... and back), in code files only (not tests, test data, vendored or tooling files). The sites
come from a real parser, the language's tree-sitter grammar (tree-sitter-go; tree-sitter-javascript
for .js/.mjs/.cjs/.jsx; tree-sitter-typescript's typescript for .ts/.mts/.cts and tsx for .tsx): a
site is the operator token of a `binary_expression` node, nothing else. So every site is a real
comparison or logical expression; comments, strings, runes, Go raw strings, regular expression
literals, the text of template strings and JSX text are never touched, while the code inside a
template's `${...}` is; operators however spaced (`a<b`) are found; a generic's brackets (`Map<K, V>`,
`f<T>(x)`, Go's `[T any]`) are not comparisons and are never flipped. A file the grammar does not parse
cleanly (a syntax error, an extension of the language the grammar lacks, not UTF-8) is not mutated: a
file we cannot parse we do not mutate. tree-sitter counts in UTF-8 bytes; a mutant's offset is in
characters of the text as read, converted once. A mutant whose file no longer parses after the flip is
dropped before any run.
"""

from __future__ import annotations

import functools
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Query, QueryCursor

from core.vocabulary import TaskSource
from patches import render, text_patch
from sandbox import Limits, grammars
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

FLIPS = {
    "<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==",
    "===": "!==", "!==": "===", "&&": "||", "||": "&&",
}  # fmt: skip
MAX_FILE_BYTES = 256 * 1024
RUN_TIMEOUT_S = 120
MAX_MESSAGE = 300
JS_MEMORY_MB = 4096

_OPERATORS = "(binary_expression operator: _ @operator)"


@dataclass(frozen=True)
class LangMutant:
    path: str
    offset: int  # in characters of the file's text as read (read_text), not in bytes
    before: str
    after: str

    def apply(self, text: str) -> str:
        return text[: self.offset] + self.after + text[self.offset + len(self.before) :]


@functools.cache
def _operators(name: str) -> Query:
    return Query(grammars.language(name), _OPERATORS)


def parses(path: str, text: str) -> bool:
    """Whether the file's grammar parses `text` without an error (or a missing token)."""
    return grammars.parse(path, text.encode("utf-8")) is not None


def sites(path: str, text: str) -> list[tuple[int, str]]:
    """The flippable operators of a file as (character offset, operator), in order: the operator
    tokens of its binary expressions; none at all when the file does not parse cleanly."""
    data = text.encode("utf-8")
    tree = grammars.parse(path, data)
    name = grammars.grammar_for(path)
    if tree is None or name is None:
        return []
    nodes = QueryCursor(_operators(name)).captures(tree.root_node).get("operator", [])
    found = []
    chars = done = 0  # `chars` characters of the text are the first `done` bytes of `data`
    for node in sorted(nodes, key=lambda n: n.start_byte):
        if node.type not in FLIPS:
            continue
        chars += len(data[done : node.start_byte].decode("utf-8"))
        done = node.start_byte
        found.append((chars, node.type))
    return found


def mutants(root: Path, language: str) -> list[LangMutant]:
    """Every operator site of the tree's code files, in a stable order."""
    found = []
    for path in sorted(lang_history.walk(root, language)):
        rel = path.relative_to(root).as_posix()
        code = lang_history.is_code(language, rel) and not lang_history.is_tooling(language, rel)
        if not code or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = path.read_text(encoding="utf-8")  # as _try reads it (newlines translated)
        except UnicodeDecodeError:
            continue
        found += [LangMutant(rel, offset, op, FLIPS[op]) for offset, op in sites(rel, text)]
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
    if not parses(mutant.path, mutated):
        return None  # the flip made a syntax error (none seen so far): not a bug a test run should judge
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
