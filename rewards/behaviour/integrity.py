"""The runner integrity plugin for one run: its module name, its source, the files it may trust.

The plugin is rewards/behaviour/integrity_plugin.py, a real module so that ruff and mypy
read it, but Crucible never imports it: it runs only inside the sandbox, loaded with -p.
It is read here as text, and this run's token and the hashes of the conftests and test
modules the harness left are written into it.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import hmac
import sys
from pathlib import Path

from patches import pysource
from tasks.spec import TaskSpec

# Files hashed for the plugin's conftest check; more than this and only conftest.py files are.
MAX_HASHED_TEST_FILES = 2000
PLUGIN_FILE = "integrity_plugin.py"
# The plugin's two lines that carry one run's values.
TOKEN_LINE = '_TOKEN = ""\n'  # noqa: S105 - the plugin's placeholder line, not a secret
HASHES_LINE = "_HASHES: dict[str, str] = {}\n"
# All the plugin may import: it runs in the task's interpreter, where Crucible is not installed.
PLUGIN_IMPORTS = frozenset(sys.stdlib_module_names) | {"pytest"}


def plugin_name(salt: bytes, task: TaskSpec) -> str:
    digest = hmac.new(salt, f"plugin\n{task.task_id}".encode(), hashlib.sha256).hexdigest()
    return f"_harness_{digest[:12]}"


def hashed_test_files(workspace: Path, task: TaskSpec) -> dict[str, str]:
    """sha256 of every conftest.py and of the test directory's modules, as the harness leaves them."""
    found: dict[str, str] = {}
    for path in workspace.rglob("conftest.py"):
        if path.is_file() and not path.is_symlink():
            found[path.relative_to(workspace).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    tests = workspace / task.tests_dest
    if tests.is_dir():
        for index, path in enumerate(tests.rglob("*.py")):
            if index >= MAX_HASHED_TEST_FILES:
                break
            if path.is_file() and not path.is_symlink():
                found[path.relative_to(workspace).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def integrity_plugin(token: str, hashes: dict[str, str]) -> str:
    """The plugin's source for one run: its token and the hashes of the conftests it may trust."""
    return (
        _template()
        .replace(TOKEN_LINE, f"_TOKEN = {token!r}\n", 1)
        .replace(HASHES_LINE, f"_HASHES: dict[str, str] = {dict(sorted(hashes.items()))!r}\n", 1)
    )


@functools.cache
def _template() -> str:
    source = Path(__file__).with_name(PLUGIN_FILE).read_text(encoding="utf-8")
    problems = [f"{line.strip()!r} is not in it once" for line in (TOKEN_LINE, HASHES_LINE) if source.count(line) != 1]
    tree = pysource.parse(source, PLUGIN_FILE)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        # Only what is imported at the top is imported before the workspace goes on sys.path;
        # a later import could load a module the workspace planted under that name.
        top = any(node is stmt for stmt in tree.body)
        relative = isinstance(node, ast.ImportFrom) and node.level > 0
        if not top or relative or not {n.split(".")[0] for n in names} <= PLUGIN_IMPORTS:
            problems.append(f"line {node.lineno} imports {', '.join(names)}")
    if problems:
        # Caught on first use, not in a sandbox: a broken plugin would fail every scoring run.
        raise RuntimeError(
            f"{PLUGIN_FILE} cannot be the harness's plugin (it may import only the standard library and pytest, "
            f"at its top, and carries the run's token and hashes once): {'; '.join(problems)}"
        )
    return source
