"""Dangerous commands in a task's tests, judged: one that could run, or one only mentioned.

A path-handling test that asserts on "/etc/passwd", or a protocol test that sends the word
'shutdown', runs nothing: the words are data. `curl` in a comment is a note. What makes a task
unsafe is such a command where it could execute: in a shell script, in the task's test command,
as code (`os.system(`, `shell=True`), or anywhere in a Python file that runs commands at all (a
call named like `system`, `popen`, `run`, `Popen`, `spawn*`, `exec*`, or one that reaches code
by name: `getattr`, `__import__`, `eval`, `exec`, `import_module`), since its data may flow into
them. Only a Python file with none of those has its strings and comments judged as data. Python
files are read as tokens and a syntax tree, never imported; one that does not parse is text.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from patches import pysource

DANGEROUS = re.compile(
    r"rm\s+-rf\s+/|\bmkfs\b|\bdd\s+if=|:\(\)\s*\{|\bcurl\b|\bwget\b|\bsudo\b|\bchmod\s+777\b|\bnc\s+-e\b|"
    # The shell's shutdown and reboot, not a method of that name (`sock.shutdown(socket.SHUT_RDWR)`).
    r"(?<![.\w])(?:shutdown|reboot|poweroff)\s+(?:-\w+|now\b|\+\d)|[\"'](?:shutdown|reboot|poweroff)[\"']|"
    r"/etc/passwd|\bos\.system\(|\bshell\s*=\s*True"
)
# Calls by these last names may run a command, or reach one by name; a file making any is judged as text.
RUNNERS = frozenset(
    {"system", "popen", "run", "call", "check_call", "check_output", "Popen", "getoutput", "getstatusoutput",
     "spawn", "posix_spawn", "posix_spawnp", "create_subprocess_exec", "create_subprocess_shell",
     "getattr", "__import__", "eval", "exec", "compile", "import_module"}
)  # fmt: skip
COMMAND_MODULES = frozenset({"os", "posix", "subprocess", "pty", "commands", "asyncio", "multiprocessing"})
MAX_FILE_BYTES = 1_000_000


@dataclass
class Findings:
    commands: list[str] = field(default_factory=list)  # would run: the task is unsafe
    mentions: list[str] = field(default_factory=list)  # in a string or comment that runs nothing


def judge(files: list[Path], root: Path, test_command: str) -> Findings:
    found = Findings()
    found.commands += [f"test_command: {m.group(0)}" for m in DANGEROUS.finditer(test_command)]
    for path in files:
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = path.read_text(errors="replace")
        except OSError:
            continue
        where = path.relative_to(root)
        # One line break, so the parser's rows, the tokenizer's and the offsets below agree.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        spans = _quiet_spans(text) if path.suffix == ".py" else None
        for m in DANGEROUS.finditer(text):
            line = f"{where}: {m.group(0)}"
            quiet = spans is not None and any(start <= m.start() and m.end() <= end for start, end in spans)
            (found.mentions if quiet else found.commands).append(line)
    return found


def _quiet_spans(text: str) -> list[tuple[int, int]] | None:
    """Offsets of the strings and comments of a Python file that runs no command; None when it
    may run one (every match then counts) or does not parse."""
    try:
        tree = pysource.parse(text)
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (SyntaxError, tokenize.TokenError, ValueError, RecursionError):
        return None
    if any(_runs(node) for node in ast.walk(tree)):
        return None
    starts = _line_starts(text)
    # tokenize counts columns in characters on 1-based rows, as str offsets do.
    return [
        (starts[token.start[0] - 1] + token.start[1], starts[token.end[0] - 1] + token.end[1])
        for token in tokens
        if token.type in (tokenize.STRING, tokenize.COMMENT)
    ]


def _runs(node: ast.AST) -> bool:
    """A call that may run a command, or a name imported from a module that runs them (`from os
    import system as s` hides the call's name)."""
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] in COMMAND_MODULES
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in RUNNERS or name.startswith(("exec", "spawn"))


def _line_starts(text: str) -> list[int]:
    """Where each row starts, rows split at "\n" only, as the tokenizer's readline splits them."""
    starts, at = [0], 0
    while (at := text.find("\n", at) + 1) > 0:
        starts.append(at)
    return starts
