"""Synthetic Go and JavaScript tasks by mutation: a flipped operator that the repository's own tests
notice becomes a task (the mutated tree as the base, the reverse flip as the expected patch, the
killed tests as FAIL_TO_PASS) that validates like any Go or JavaScript task. The sites come from the
languages' tree-sitter grammars: only binary expressions' operators, never comments, strings, regular
expressions, JSX text or generics' brackets; a file that does not parse is not mutated."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sandbox.backends.bwrap import BwrapBackend
from tasks.builders.lang_mutation import mutants, parses, synthesize_lang
from tasks.models import Task
from tasks.services import import_task_dirs, validate_task
from tests.conftest import DEMO


def _fixed(task_dir: Path, dest: str, tmp_path: Path) -> Path:
    """The demo task's repository after its fix, with its tests in place: a tree whose tests pass."""
    repo = tmp_path / "repo"
    shutil.copytree(task_dir / "repo_snapshot", repo)
    subprocess.run(["git", "apply", str(task_dir / "expected_patch")], cwd=repo, check=True, capture_output=True)
    (repo / dest).mkdir(exist_ok=True)
    for test in (task_dir / "tests").iterdir():
        shutil.copy(test, repo / dest / test.name)
    return repo


def _sites(root: Path, language: str) -> list[tuple[str, str, str]]:
    """Each mutant as (file, the line it is on with the operator marked, flip), after checking that
    the offset names the operator in the file's text and that the mutated file still parses."""
    out = []
    for m in mutants(root, language):
        text = (root / m.path).read_text(encoding="utf-8")
        assert text[m.offset : m.offset + len(m.before)] == m.before, m
        assert parses(m.path, m.apply(text)), f"{m} does not parse after the flip"
        line_start = text.rfind("\n", 0, m.offset) + 1
        line_end = text.find("\n", m.offset)
        marked = text[line_start : m.offset] + "[" + m.before + "]" + text[m.offset + len(m.before) : line_end]
        out.append((m.path, marked.strip(), m.after))
    return out


GO_SOURCE = """package m

// a < b in a comment, /* c == d */ too
/* e && f */

type Set[T comparable] map[T]struct{}

type Pair[K comparable, V any] struct{ k K; v V }

func Max[T int | float64](a, b T) T {
	if a<b {
		return b
	}
	return a
}

func f(c chan int, x, y int) (bool, string) {
	s := "x < y" + `raw > string && ` + string('<')
	c <- x
	_ = <-c
	_ = x << 2
	ok := x == y && y >= 0 || x != 1
	return ok, s
}
"""


def test_go_sites_are_the_operators_of_binary_expressions_only(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module example.com/m\n\ngo 1.19\n")
    (tmp_path / "m.go").write_text(GO_SOURCE)
    (tmp_path / "m_test.go").write_text("package m\n\nvar _ = 1 < 2\n")  # a test file: never mutated
    (tmp_path / "testdata").mkdir()
    (tmp_path / "testdata" / "t.go").write_text("package t\n\nvar _ = 1 < 2\n")
    assert _sites(tmp_path, "go") == [
        ("m.go", "if a[<]b {", "<="),  # unspaced: found
        ("m.go", "ok := x [==] y && y >= 0 || x != 1", "!="),
        ("m.go", "ok := x == y [&&] y >= 0 || x != 1", "||"),
        ("m.go", "ok := x == y && y [>=] 0 || x != 1", ">"),
        ("m.go", "ok := x == y && y >= 0 [||] x != 1", "&&"),
        ("m.go", "ok := x == y && y >= 0 || x [!=] 1", "=="),
    ]


JS_SOURCE = """// a < b in a comment
/* c == d */
const re = /a<b/g;
const s = "e < f" + 'g && h';
export function pick(a, b, items) {
  const label = `${a < b} items < ${items.length}`;
  if (a<b && re.test(s)) return label;
  return items.filter((x) => x !== a || x>=b);
}
"""

JSX_SOURCE = """export const View = ({ a, b }) => <p title="a < b">a &lt; b {a<b ? "x" : "y"}</p>;
"""

TS_SOURCE = """const m: Map<string, number> = new Map<string, number>();
export function first<T>(xs: Array<T>, n: number): T | undefined {
  const ys = identity<Array<T>>(xs);
  return n >= ys.length ? undefined : ys[n];
}
function identity<T>(x: T): T { return x; }
"""

TSX_SOURCE = """export const View = (p: { n: number }) => <ul>{p.n > 0 && <li>n &gt; 0</li>}</ul>;
"""


def test_javascript_and_typescript_sites_never_touch_comments_strings_regexes_jsx_text_or_generics(
    tmp_path: Path,
) -> None:
    (tmp_path / "package.json").write_text('{"name": "m", "type": "module"}\n')
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pick.js").write_text(JS_SOURCE)
    (tmp_path / "src" / "view.jsx").write_text(JSX_SOURCE)
    (tmp_path / "src" / "first.ts").write_text(TS_SOURCE)
    (tmp_path / "src" / "view.tsx").write_text(TSX_SOURCE)
    (tmp_path / "src" / "pick.test.js").write_text("expect(1 < 2).toBe(true);\n")  # a test: never mutated
    (tmp_path / "vitest.config.js").write_text("export default { a: 1 < 2 };\n")  # tooling: never mutated
    assert _sites(tmp_path, "javascript") == [
        ("src/first.ts", "return n [>=] ys.length ? undefined : ys[n];", ">"),  # generics are not sites
        ("src/pick.js", "const label = `${a [<] b} items < ${items.length}`;", "<="),  # ${...} is code
        ("src/pick.js", "if (a[<]b && re.test(s)) return label;", "<="),
        ("src/pick.js", "if (a<b [&&] re.test(s)) return label;", "||"),
        ("src/pick.js", "return items.filter((x) => x [!==] a || x>=b);", "==="),
        ("src/pick.js", "return items.filter((x) => x !== a [||] x>=b);", "&&"),
        ("src/pick.js", "return items.filter((x) => x !== a || x[>=]b);", ">"),
        ("src/view.jsx", 'export const View = ({ a, b }) => <p title="a < b">a &lt; b {a[<]b ? "x" : "y"}</p>;', "<="),
        ("src/view.tsx", "export const View = (p: { n: number }) => <ul>{p.n [>] 0 && <li>n &gt; 0</li>}</ul>;", ">="),
        ("src/view.tsx", "export const View = (p: { n: number }) => <ul>{p.n > 0 [&&] <li>n &gt; 0</li>}</ul>;", "||"),
    ]


def test_a_file_the_grammar_cannot_parse_is_not_mutated(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module example.com/m\n\ngo 1.19\n")
    (tmp_path / "broken.go").write_text("package m\n\nfunc f(a, b int) bool {\n\treturn a < b\n")  # no closing brace
    (tmp_path / "ok.go").write_text("package m\n\nfunc g(a, b int) bool { return a > b }\n")
    (tmp_path / "latin1.go").write_bytes("package m\n\n// caf\xe9\nvar v = 1 < 2\n".encode("latin-1"))  # not UTF-8
    assert [(m.path, m.before) for m in mutants(tmp_path, "go")] == [("ok.go", ">")]
    js = tmp_path / "js"
    js.mkdir()
    (js / "package.json").write_text('{"name": "m"}\n')
    (js / "flow.js").write_text("// @flow\nexport function f(a: number): boolean { return a < 1 }\n")  # Flow: not JS
    (js / "half.ts").write_text("export const f = (a: number) => a < 1 &&;\n")
    assert mutants(js, "javascript") == []


def test_non_ascii_text_before_a_site_still_flips_the_right_bytes(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"name": "m"}\n')
    text = '// Größe, 日本語, 🚀\nconst s = "naïve — ✓";\nexport const f = (a, b) => a === b || s<"é";\n'
    (tmp_path / "f.js").write_text(text, encoding="utf-8")
    found = mutants(tmp_path, "javascript")
    assert [(m.before, m.after) for m in found] == [("===", "!=="), ("||", "&&"), ("<", "<=")]
    assert found[0].offset == text.index("===")  # characters, not UTF-8 bytes
    assert len(text[: found[0].offset].encode()) > found[0].offset
    mutated = [m.apply(text) for m in found]
    assert mutated[0] == text.replace("a === b", "a !== b")
    assert mutated[1] == text.replace("a === b || s", "a === b && s")
    assert mutated[2] == text.replace('s<"é"', 's<="é"')  # unspaced, after multi-byte characters
    assert all(parses("f.js", m) for m in mutated)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("task_dir", "dest", "language"),
    [(DEMO / "go_tasks" / "go_0003", "lists", "go"), (DEMO / "js_tasks" / "js_0003", "test", "javascript")],
    ids=["go", "javascript"],
)
def test_a_noticed_mutant_becomes_a_valid_task(task_dir: Path, dest: str, language: str, tmp_path: Path) -> None:
    repo = _fixed(task_dir, dest, tmp_path)
    built = synthesize_lang(repo, language, 1, 7, tmp_path / "out", BwrapBackend(), "demo", max_tries=12)
    assert len(built) == 1, "no mutant among the first 12 was noticed by the tests"
    patch = (built[0] / "expected_patch").read_text()
    assert sum(line.startswith("-") and not line.startswith("---") for line in patch.splitlines()) == 1
    import_task_dirs(built[0], "synth")
    task = Task.objects.get(suite__name="synth")
    assert task.language == language and task.metadata["source"] == "synthetic_mutation"
    report = validate_task(task, runs=1)
    task.refresh_from_db()
    assert report.status == "valid", task.validation_report["reasons"]
    assert task.fail_to_pass and "flip" in " ".join(task.tags)


@pytest.mark.django_db
def test_synth_tasks_on_a_go_repository_builds_and_validates_mutants(tmp_path: Path) -> None:
    repo = _fixed(DEMO / "go_tasks" / "go_0001", "lists", tmp_path)
    args = ("--repo", str(repo), "--count", "1", "--suite", "go-synth", "--validate", "--runs", "1")
    call_command("synth_tasks", *args, verbosity=0, stdout=io.StringIO(), stderr=io.StringIO())
    (task,) = Task.objects.filter(suite__name="go-synth")
    assert task.language == "go" and task.validation_status == "valid", task.validation_report.get("reasons")
    with pytest.raises(CommandError, match="--combine"):
        call_command("synth_tasks", *args, "--combine", "1", verbosity=0, stdout=io.StringIO(), stderr=io.StringIO())
