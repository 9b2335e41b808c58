"""search_symbol finds Go and JavaScript/TypeScript definitions as it finds Python's, and a workspace
cannot turn it into a regex, a hang, a huge read or a read outside the workspace."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sandbox import ToolError
from sandbox.tools import MAX_SEARCH_FILE_BYTES, search, search_symbol

GO_SOURCE = """package store

const Version = "1"

const (
\tMaxKeys, MinKeys = 100, 1
\tdefaultTTL = 60
)

var ErrMissing = errors.New("missing")

type Store struct{ items map[string]string }

type (
\tKey string
)

// Get is a plain function: Store.Get below is the method.
func Get(s *Store, k Key) string { return s.items[string(k)] }

func (s *Store) Get(k Key) string { return s.items[string(k)] }

func (Store) Len() int { return 0 }

func Map[T any](xs []T) []T { return xs }

var GetAll = 1
"""

TS_SOURCE = """export function slugify(title: string): string {
  return title;
}

export default class Parser<T> extends Base {
  static create(text: string): Parser<string> {
    if (text) {
      return new Parser();
    }
  }

  async parse(text: string): Promise<T> {
    return JSON.parse(text);
  }
}

export const words = (title: string) => title.split(" ");
const $el = document.body;
let parseCount = 0;
module.exports.legacy = function () {};

export interface Options {
  strict: boolean;
}

export type Mode = "fast" | "slow";
"""


def symbols(workspace: Path, name: str) -> list[tuple[str, int, str]]:
    return [(m.path, m.line, m.text) for m in search_symbol(workspace, name)]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "store").mkdir(parents=True)
    (root / "store" / "store.go").write_text(GO_SOURCE)
    (root / "src").mkdir()
    (root / "src" / "parser.ts").write_text(TS_SOURCE)
    (root / "lib.py").write_text("class Store:\n    def get(self):\n        pass\n")
    return root


def test_it_finds_go_functions_methods_types_constants_and_variables(workspace: Path) -> None:
    go = "store/store.go"
    assert symbols(workspace, "Get") == [(go, 19, "func Get"), (go, 21, "method Store.Get")]
    assert symbols(workspace, "Store.Get") == [(go, 21, "method Store.Get")]
    assert symbols(workspace, "Len") == [(go, 23, "method Store.Len")]
    assert symbols(workspace, "Map") == [(go, 25, "func Map")]
    assert symbols(workspace, "Store") == [("lib.py", 1, "class Store"), (go, 12, "type Store")]
    assert symbols(workspace, "Key") == [(go, 15, "type Key")]
    assert symbols(workspace, "Version") == [(go, 3, "const Version")]
    assert symbols(workspace, "MinKeys") == [(go, 6, "const MinKeys")]
    assert symbols(workspace, "defaultTTL") == [(go, 7, "const defaultTTL")]
    assert symbols(workspace, "ErrMissing") == [(go, 10, "var ErrMissing")]
    # A use is not a definition, and a longer name is another name.
    assert symbols(workspace, "items") == []


def test_it_finds_javascript_and_typescript_definitions(workspace: Path) -> None:
    ts = "src/parser.ts"
    assert symbols(workspace, "slugify") == [(ts, 1, "function slugify")]
    assert symbols(workspace, "Parser") == [(ts, 5, "class Parser")]
    assert symbols(workspace, "create") == [(ts, 6, "method Parser.create")]
    assert symbols(workspace, "Parser.parse") == [(ts, 12, "method Parser.parse")]
    assert symbols(workspace, "words") == [(ts, 17, "const words")]
    assert symbols(workspace, "$el") == [(ts, 18, "const $el")]
    assert symbols(workspace, "parseCount") == [(ts, 19, "let parseCount")]
    assert symbols(workspace, "legacy") == [(ts, 20, "exports legacy")]
    assert symbols(workspace, "Options") == [(ts, 22, "interface Options")]
    assert symbols(workspace, "Mode") == [(ts, 26, "type Mode")]
    assert symbols(workspace, "get") == [("lib.py", 2, "def Store.get")]
    # `if (text) {` inside a method is no method called "if"; a field is no definition.
    assert symbols(workspace, "strict") == []


def test_a_name_is_literal_text_never_a_pattern(workspace: Path) -> None:
    for hostile in ["Get|Len", ".*", "Get(", "a b", "Get\nLen", "x" * 201, ""]:
        with pytest.raises(ToolError, match="a symbol is a name"):
            search_symbol(workspace, hostile)
    # `$` is a JavaScript name's character, not an end-of-line anchor.
    (workspace / "src" / "dollar.js").write_text("export const a$b = 1;\nexport const a = 2;\n")
    assert symbols(workspace, "a$b") == [("src/dollar.js", 1, "const a$b")]


def test_links_fifos_and_huge_files_are_never_read(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.go").write_text("package secret\n\nfunc Secret() {}\n")
    (workspace / "linked.go").symlink_to(outside / "secret.go")
    (workspace / "linkdir").symlink_to(outside, target_is_directory=True)
    os.mkfifo(workspace / "waiting.go")  # opened blocking, it would wait for a writer forever
    huge = "package big\n" + "// padding\n" * (MAX_SEARCH_FILE_BYTES // 10) + "func Secret() {}\n"
    (workspace / "big.go").write_text(huge)
    # A line of most of a megabyte (minified code) is looked at over its start only.
    (workspace / "src" / "min.js").write_text("const Secret = 1;" + " (" * 450_000 + "\n")
    started = time.monotonic()
    assert symbols(workspace, "Secret") == [("src/min.js", 1, "const Secret")]
    assert [m.path for m in search(workspace, "Secret")] == ["src/min.js"]
    assert time.monotonic() - started < 5
