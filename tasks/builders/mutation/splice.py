"""From a site to mutated text, and whether that text still parses.

:class:`Splicer` rewrites only the characters of the replaced node (linear in the edit,
not in the file); :class:`SyntaxChecker` re-compiles as little as it can to reject
mutants that no longer parse. ``compiles`` and ``parses`` are shared with ``combine``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import MetadataWrapper, PositionProvider, WhitespaceInclusivePositionProvider

from tasks.builders.mutation.sites import Site


class Splicer:
    """Turns a site into mutated text by rewriting only the old node's characters.

    Regenerating the whole module per mutant (``deep_replace(...).code``) costs
    O(file size) each, which makes big files quadratic; splicing is linear in
    the edit. The old node is re-rendered first and must reproduce the source
    exactly, otherwise the site falls back to the whole-module path.
    """

    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.module = wrapper.module
        self.text = wrapper.module.code
        self.inclusive = wrapper.resolve(WhitespaceInclusivePositionProvider)
        self.syntactic = wrapper.resolve(PositionProvider)
        self.line_starts = [0] + [match.end() for match in re.finditer(r"\r\n|\r|\n", self.text)]

    def apply(self, site: Site) -> str | None:
        if site.whole_lines:
            start, end = self.lines_of(site.old)
            return self.text[:start] + self.text[end:]
        span = self.inclusive[site.old]
        start = self._offset(span.start.line, span.start.column)
        end = self._offset(span.end.line, span.end.column)
        if _render(self.module, site.old, site.indent) != self.text[start:end]:
            return self._regenerate(site)
        replacement = "" if site.new is None else _render(self.module, site.new, site.indent)
        return self.text[:start] + replacement + self.text[end:]

    def _offset(self, line: int, column: int) -> int:
        return self.line_starts[line - 1] + column

    def lines_of(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of the whole physical lines ``node`` spans: [start, end)."""
        span = self.syntactic[node]
        start = self.line_starts[span.start.line - 1]
        end = self.line_starts[span.end.line] if span.end.line < len(self.line_starts) else len(self.text)
        return start, end

    def _regenerate(self, site: Site) -> str | None:
        if site.new is None:
            return None  # never seen in practice; dropping one mutant beats guessing
        regenerated = self.module.deep_replace(site.old, site.new)
        return regenerated.code if isinstance(regenerated, cst.Module) else None


def _render(module: cst.Module, node: cst.CSTNode, indent: Sequence[str]) -> str:
    """Code for ``node`` as it would print inside blocks indented by ``indent``.

    ``Module.code_for_node`` renders at column zero, which is wrong for nodes
    that span lines inside brackets (continuation lines carry the block indent).
    """
    state = CodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        indent_tokens=list(indent),
    )
    node._codegen(state)
    return "".join(state.tokens)


class SyntaxChecker:
    """Decides whether a mutated file still parses, re-parsing as little as it can.

    Parsing the whole file per mutant dominates the cost on big files, so a
    mutant inside a function is checked by compiling just that function (as the
    body of an ``if 1:`` when it is indented). That is only trusted when the
    untouched function compiles on its own; otherwise (say it uses ``nonlocal``)
    the whole file is compiled.

    The real compiler is used whenever the original compiles under this
    interpreter: it also rejects what libcst's grammar allows, such as
    ``return None`` inside an async generator.
    """

    def __init__(self, splicer: Splicer, path: str) -> None:
        self.splicer = splicer
        self.path = path
        self.strict = compiles(splicer.text, path)
        self._standalone: dict[int, bool] = {}

    def accepts(self, site: Site, mutated: str) -> bool:
        if site.unit is not None:
            start, end = self.splicer.lines_of(site.unit)
            if self._compiles_alone(site.unit, self.splicer.text[start:end]):
                grown = len(mutated) - len(self.splicer.text)
                return parses(_as_block(mutated[start : end + grown]), self.path, self.strict)
        return parses(mutated, self.path, self.strict)

    def _compiles_alone(self, unit: cst.FunctionDef, text: str) -> bool:
        if id(unit) not in self._standalone:
            self._standalone[id(unit)] = parses(_as_block(text), self.path, self.strict)
        return self._standalone[id(unit)]


def _as_block(snippet: str) -> str:
    return "if 1:\n" + snippet if snippet[:1] in (" ", "\t") else snippet


def compiles(source: str, path: str) -> bool:
    with warnings.catch_warnings():
        # `x is 1` style SyntaxWarnings are noise here; only errors matter.
        warnings.simplefilter("ignore")
        try:
            compile(source, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


def parses(source: str, path: str, strict: bool) -> bool:
    """With ``strict`` use the running interpreter; otherwise (the original uses
    syntax this interpreter lacks) settle for libcst's grammar."""
    if strict:
        return compiles(source, path)
    try:
        cst.parse_module(source)
    except cst.ParserSyntaxError:
        return False
    return True
