"""The walk over one source's syntax tree, and the detectors that fire on what it finds.

Runner tampering, reflection, dynamic code (and the payloads handed to exec, scanned in turn),
exit hooks, reading the command line or the run's settings, paths outside the repository and
git history in strings; comparisons are checked by `Equality`.
"""

from __future__ import annotations

import ast
import logging
import re

from patches import pysource
from rewards.anticheat.equality import Equality
from rewards.anticheat.files import outside_workspace
from rewards.anticheat.flags import Finding
from rewards.anticheat.folding import FileBytes, FileText
from rewards.anticheat.patterns import (
    ARGV,
    CODE_LOADERS,
    COMPARISONS,
    DYNAMIC,
    EXEC_CALLS,
    EXIT_HOOK,
    EXIT_HOOKS,
    EXITS,
    FIFOS,
    FRAME_WALKS,
    FRAMEWORK_IDENTIFIERS,
    FRAMEWORK_ROOTS,
    FRAMEWORK_TEXT,
    GC_WALKS,
    GIT_HISTORY,
    HISTORY,
    IMPORT_HOOKS,
    IMPORTERS,
    INTERPRETER_HOOKS,
    KILLS,
    MAX_PAYLOAD_DEPTH,
    OUTSIDE,
    PATH_CALLS,
    PYTEST_HOOK,
    REFLECTION,
    REPORT_ENV,
    REPORT_TEXT,
    SUMMARY_LINE,
    SYSTEM_PATH,
    TAMPERING,
    WORKSPACE,
)

logger = logging.getLogger(__name__)


def _is_main_guard(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names) and bool(mains)


class Analysis(Equality):
    """The findings of one Python source (a file, or a payload it hands to exec)."""

    def run(self) -> list[Finding]:
        # (node, inside a function, under `if __name__ == "__main__"`, inside a folded expression)
        stack: list[tuple[ast.AST, bool, bool, bool]] = [(self.tree, False, False, False)]
        while stack:
            node, in_function, main, folded = stack.pop()
            try:
                self._check(node, in_function, main, folded)
            except RecursionError:
                logger.info("%s:%s: an expression too deep to analyse", self.rel, getattr(node, "lineno", "?"))
            folded_here = folded
            if not folded and isinstance(node, ast.BinOp | ast.JoinedStr | ast.Call | ast.Subscript):
                folded_here = isinstance(self.fold(node), str | bytes)
            if isinstance(node, ast.If) and _is_main_guard(node.test):
                stack += [(c, in_function, True, folded) for c in node.body]
                stack += [(c, in_function, main, folded) for c in node.orelse]
                continue
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                outer = [*getattr(node, "decorator_list", []), *node.args.defaults, *node.args.kw_defaults]
                stack += [(c, in_function, main, folded) for c in outer if c is not None]
                body = [node.body] if isinstance(node, ast.Lambda) else node.body
                stack += [(c, True, main, folded) for c in body]
                continue
            stack += [(c, in_function, main, folded_here) for c in ast.iter_child_nodes(node)]
        return self.findings

    def _check(self, node: ast.AST, in_function: bool, main: bool, folded: bool) -> None:  # noqa: C901
        library = not main and not self.rel.endswith("__main__.py")
        if isinstance(node, ast.Import):
            for alias in node.names:
                self._imported(alias.name, node)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            self._imported(node.module, node)
            for alias in node.names:
                if f"{node.module}.{alias.name}" in IMPORT_HOOKS:
                    self.add(REFLECTION, "installs an import hook", node)
        elif isinstance(node, ast.Call):
            self._call(node, in_function, library)
        elif isinstance(node, ast.Attribute):
            self._attribute(node, library)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            self._subscript_store(node)
        elif isinstance(node, ast.Subscript):
            base = self.qual(node.value)
            if base == "sys.modules":
                name = self.fold_str(node.slice)
                if name is None:
                    self.add(REFLECTION, "looks a module up under a computed name", node)
                else:
                    self._imported(name, node, "looks up")
            elif base in ("os.environ", "os.environb"):
                self._environment(node.slice, node)
        elif isinstance(node, ast.Name):
            self._name(node, library)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self._definition(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None:
                for target in targets:
                    self._binding_target(target, node.value, node)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                name = self.fold_str(key) if key is not None else None
                if name in COMPARISONS:
                    self._bound(name, value, node, monkeypatch=True)
                elif name and PYTEST_HOOK.match(name):
                    self.add(TAMPERING, "defines a pytest hook", node)
        elif isinstance(node, ast.Raise) and node.exc is not None and library:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if self.qual(exc) == "builtins.SystemExit":
                self.add(EXIT_HOOK, "exits the interpreter from library code", node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            if id(node) not in self.docstrings:
                self._text(node.value, node, composite=False)
        if not folded and isinstance(node, ast.BinOp | ast.JoinedStr | ast.Call | ast.Subscript | ast.Name):
            value = self.fold(node)
            # A data file's own words are not code: its content is scanned only when run (exec).
            from_file = isinstance(value, FileText | FileBytes)
            if isinstance(value, str | bytes) and not from_file and not isinstance(node, ast.Name):
                self._text(value, node, composite=True)
            elif isinstance(value, list) and all(isinstance(v, str) for v in value) and value:
                self._text(" ".join(value), node, composite=True)

    def _imported(self, module: str, node: ast.AST, how: str = "imports") -> None:
        root = module.split(".")[0]
        if root in FRAMEWORK_ROOTS:
            self.add(TAMPERING, f"{how} the test framework ({module})", node)
        elif root == "ctypes":
            self.add(REFLECTION, "reaches into the interpreter's memory (ctypes)", node)
        elif root == "marshal":
            self.add(DYNAMIC, f"{how} marshal (code objects from bytes)", node)

    def _call(self, node: ast.Call, in_function: bool, library: bool) -> None:  # noqa: C901
        func = self.qual(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if func in EXEC_CALLS:
            self.add(DYNAMIC, f"runs code built at run time ({func.split('.')[-1]})", node)
            if node.args:
                self._payload(node.args[0], node)
        elif func in CODE_LOADERS or method in ("exec_module", "load_module"):
            self.add(DYNAMIC, f"loads code from data ({func or method})", node)
        elif func in IMPORTERS:
            name = self.fold_str(node.args[0]) if node.args else None
            if name is None:
                self.add(REFLECTION, "imports a module whose name is computed", node)
            else:
                self._imported(name, node, "imports by name")
        elif func in GC_WALKS:
            self.add(REFLECTION, "walks the garbage collector's objects (finds the runner without naming it)", node)
        elif func in FRAME_WALKS:
            self.add(REFLECTION, "walks the interpreter's call stack", node)
        elif func in INTERPRETER_HOOKS:
            self.add(REFLECTION, "installs an interpreter hook", node)
        elif func in KILLS:
            if in_function:
                self.add(EXIT_HOOK, f"ends or signals the process ({func})", node)
            else:
                self.add(TAMPERING, f"ends or signals the process while being imported ({func})", node)
        elif func in EXITS and library:
            self.add(EXIT_HOOK, "exits the interpreter from library code", node)
        elif func in EXIT_HOOKS:
            self.add(EXIT_HOOK, f"registers a hook that runs at exit or on a signal ({func})", node)
        elif func in FIFOS:
            self.add(OUTSIDE, "makes a FIFO or device node (a reader of it blocks)", node)
        if func in ("builtins.getattr", "builtins.setattr", "builtins.delattr", "operator.attrgetter") or method in (
            "__getattribute__",
            "__setattr__",
            "__delattr__",
        ):
            self._reflective_access(node, func or method or "")
        if func in PATH_CALLS:
            for arg in node.args[:2]:
                path = self.fold_str(arg)
                if path is not None and outside_workspace(path):
                    self.add(OUTSIDE, "touches a path outside the repository", node, path)
        if func and (
            func.startswith(("sys.meta_path.", "sys.path_hooks.")) or func == "sys.path_importer_cache.update"
        ):
            self.add(REFLECTION, "installs an import hook", node)
        if func and func.startswith("sys.modules.") and method in ("update", "pop", "setdefault", "clear", "popitem"):
            self.add(TAMPERING, "rewrites the interpreter's table of imported modules", node)
        if func and func.startswith(("os.environ.", "os.environb.")) and node.args:
            self._environment(node.args[0], node)
        if func in ("os.getenv", "os.getenvb", "os.putenv", "os.unsetenv") and node.args:
            self._environment(node.args[0], node)
        if func and func.startswith("psutil.") and method == "cmdline":
            self.add(ARGV, "reads the command line of a process", node)
        # A comparison bound through a call: setattr(cls, "__eq__", f), ns.setdefault("__eq__", f), ...
        for index, arg in enumerate(node.args[:-1]):
            name = self.fold_str(arg)
            if name in COMPARISONS:
                self._bound(name, node.args[index + 1], node, monkeypatch=True)
        for keyword in node.keywords:
            if keyword.arg in COMPARISONS:
                self._bound(keyword.arg, keyword.value, node, monkeypatch=True)

    def _reflective_access(self, node: ast.Call, how: str) -> None:
        args = list(node.args)
        if how in ("__setattr__", "__delattr__", "__getattribute__") and isinstance(node.func, ast.Attribute):
            owner = self.qual(node.func.value)
            if owner not in ("builtins.object", "builtins.type"):
                args = [node.func.value, *args]
        target_index = 0 if how == "operator.attrgetter" else 1
        if len(args) <= target_index:
            return
        name = self.fold_str(args[target_index])
        if name is None:
            self.add(REFLECTION, "reaches an attribute whose name is computed", node)
            return
        base = self.qual(args[0]) if target_index else None
        full = f"{base}.{name}" if base else name
        writes = how.endswith(("setattr", "delattr", "__setattr__", "__delattr__"))
        if base and base.split(".")[0] in FRAMEWORK_ROOTS:
            self.add(TAMPERING, "reaches into the test framework by name", node, full)
        elif writes and base == "builtins":
            self.add(TAMPERING, "patches builtins", node, full)
        elif name in FRAMEWORK_IDENTIFIERS or PYTEST_HOOK.match(name):
            self.add(TAMPERING, "touches the test runner's internals by name", node, name)
        elif full in ("sys.argv", "sys.orig_argv"):
            self.add(ARGV, "reads the command line", node, full)

    def _attribute(self, node: ast.Attribute, library: bool) -> None:
        full = self.qual(node)
        if isinstance(node.ctx, ast.Store | ast.Del):
            base = self.qual(node.value)
            if base and base.split(".")[0] in FRAMEWORK_ROOTS:
                self.add(TAMPERING, "changes the test framework's objects", node)
            elif base == "builtins":
                self.add(TAMPERING, "patches builtins", node)
            elif node.attr in FRAMEWORK_IDENTIFIERS or PYTEST_HOOK.match(node.attr):
                self.add(TAMPERING, "replaces a test runner's internals", node)
            elif full in IMPORT_HOOKS:
                self.add(REFLECTION, "installs an import hook", node)
            elif node.attr in ("__code__", "__globals__"):
                self.add(DYNAMIC, "swaps a function's code", node)
            elif node.attr in ("__bases__", "__class__"):
                self.add(REFLECTION, f"changes {node.attr} at run time", node)
            return
        if full in ("sys.argv", "sys.orig_argv") and library:
            self.add(ARGV, "reads the command line", node)
        elif node.attr == "__subclasses__":
            self.add(REFLECTION, "walks a class's subclasses (finds the runner's classes without naming them)", node)
        elif node.attr in ("f_back", "f_globals", "f_locals", "tb_frame", "gi_frame", "cr_frame"):
            self.add(REFLECTION, "reaches into stack frames", node)
        elif node.attr in FRAMEWORK_IDENTIFIERS:
            self.add(TAMPERING, "touches the test runner's internals", node)

    def _subscript_store(self, node: ast.Subscript) -> None:
        base = self.qual(node.value)
        key = self.fold_str(node.slice)
        if base == "sys.modules":
            self.add(TAMPERING, "rewrites the interpreter's table of imported modules", node)
        elif base == "builtins" or (
            isinstance(node.value, ast.Call)
            and self.qual(node.value.func) == "builtins.vars"
            and node.value.args
            and self.qual(node.value.args[0]) == "builtins"
        ):
            self.add(TAMPERING, "patches builtins", node)
        elif base in IMPORT_HOOKS:
            self.add(REFLECTION, "installs an import hook", node)
        elif base in ("os.environ", "os.environb"):
            self._environment(node.slice, node)
        if key and PYTEST_HOOK.match(key):
            self.add(TAMPERING, "defines a pytest hook", node)

    def _environment(self, key_node: ast.AST, node: ast.AST) -> None:
        key = self.fold_str(key_node)
        if key is not None and REPORT_ENV.search(key):
            self.add(ARGV, "reads the test run's settings from the environment", node, key)

    def _name(self, node: ast.Name, library: bool) -> None:
        if node.id in FRAMEWORK_IDENTIFIERS:
            self.add(TAMPERING, "touches the test runner's internals", node)
        elif isinstance(node.ctx, ast.Store) and PYTEST_HOOK.match(node.id):
            self.add(TAMPERING, "defines a pytest hook", node)
        elif library and isinstance(node.ctx, ast.Load) and self.aliases.get(node.id) in ("sys.argv", "sys.orig_argv"):
            self.add(ARGV, "reads the command line", node)

    def _definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        if PYTEST_HOOK.match(node.name):
            self.add(TAMPERING, "defines a pytest hook", node)
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.qual(target) in EXIT_HOOKS:
                self.add(EXIT_HOOK, f"registers a hook that runs at exit or on a signal ({self.qual(target)})", node)
        self._defined_comparison(node)

    # -- text --------------------------------------------------------------------------

    def _text(self, value: str | bytes, node: ast.AST, composite: bool) -> None:
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        shown = text if composite else None
        framework = FRAMEWORK_TEXT.search(text)
        if framework:
            self.add(TAMPERING, f"names the test runner's internals ({framework.group(0)})", node, shown)
        elif composite and text.split(".")[0] in FRAMEWORK_ROOTS and re.fullmatch(r"[\w.]+", text):
            self.add(TAMPERING, "builds the test framework's name from pieces", node, shown)
        if SUMMARY_LINE.search(text):
            self.add(TAMPERING, "prints a pytest summary line", node, shown)
        report = REPORT_TEXT.search(text)
        if report:
            self.add(ARGV, f"names the test run's report or settings ({report.group(0)})", node, shown)
        if SYSTEM_PATH.search(text) and not text.startswith(WORKSPACE):
            self.add(OUTSIDE, "names a path outside the repository", node, shown)
        if GIT_HISTORY.search(text):
            self.add(HISTORY, "runs git history commands from code", node, shown)

    def _payload(self, arg: ast.expr, call: ast.Call) -> None:
        """Code handed to exec/eval/compile is scanned like the file that holds it."""
        code = self.fold(arg)
        if isinstance(code, bytes):
            code = code.decode("utf-8", "replace")
        if not isinstance(code, str) or self.depth >= MAX_PAYLOAD_DEPTH:
            return
        try:
            tree = pysource.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        inner = Analysis(tree, code, self.rel, self.root, self.depth + 1, self, self.at_line or call.lineno)
        self.findings += inner.run()
