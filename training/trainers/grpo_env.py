"""GRPO's environment: Crucible's verified reward and sandbox tools, in the training process.

Plain Python: the task is a task directory on disk (the train file's `task_dir`), scored by
`rewards.scoring.score_patch` exactly as the reward service scores a trajectory, and the agent
mode's tools are `trajectories.tools.run_tool` on a `sandbox.Sandbox` over the task's snapshot.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.vocabulary import Termination
from patches import PatchError, parse
from rewards.scoring import Score, score_patch
from rewards.spec import RewardSpec, load_spec
from sandbox import Sandbox, SandboxError
from sandbox.names import DEFAULT_BACKEND
from tasks.lang_tests import GO, JAVASCRIPT, PYTHON
from tasks.spec import TaskSpec, task_environment
from training.trainers.common import TrainerError, log
from trajectories.lang_runs import LanguageRunner
from trajectories.tools import TOOL_ACTION_TYPES, bound, run_tool

# What a single-turn prompt shows of each file the task is about (a 135M model's context is 8k).
MAX_FILE_CHARS = 6000
MAX_COMPLETION_CHARS = 20000  # kept in a rollout event
_PATCH_PROMPT = """You are a software engineer fixing a bug in a {language} repository.
Reply with the fix as one unified diff (git format: diff --git a/PATH b/PATH, ---/+++ lines, @@ hunks)
and nothing else. Paths are relative to the repository root."""
_LANGUAGE_NAMES = {PYTHON: "Python", GO: "Go", JAVASCRIPT: "JavaScript/TypeScript"}


def patch_system_prompt(language: str = PYTHON) -> str:
    """The single-turn system prompt of a task in `language` (Python's is the one runs were made with)."""
    return _PATCH_PROMPT.format(language=_LANGUAGE_NAMES.get(language, _LANGUAGE_NAMES[PYTHON]))


_DIFF_START = re.compile(r"^(diff --git |--- )", re.MULTILINE)
_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*$", re.MULTILINE)


def probe_secret() -> bytes:
    """The reward service's probe key, which the launcher passes (training.launcher.trainer_environment);
    run by hand without it, one key per run (still unpredictable to the policy, the same for every
    rollout of the run)."""
    given = os.environ.get("CRUCIBLE_PROBE_SECRET", "")
    try:
        return bytes.fromhex(given) if given else _RUN_SECRET
    except ValueError:
        raise TrainerError("CRUCIBLE_PROBE_SECRET must be hex") from None


_RUN_SECRET = os.urandom(32)


@dataclass
class Scorer:
    """Scores patches on task directories; task specs are read once per directory."""

    backend: str = DEFAULT_BACKEND
    spec: RewardSpec | None = None

    def __post_init__(self) -> None:
        self.spec = self.spec or load_spec()
        self._tasks: dict[str, TaskSpec] = {}
        self._lock = threading.Lock()

    def task(self, task_dir: str) -> TaskSpec:
        with self._lock:
            if task_dir not in self._tasks:
                path = Path(task_dir)
                if not (path / "metadata.json").is_file() or not (path / "repo_snapshot").is_dir():
                    raise TrainerError(f"task_dir {task_dir!r} is not a task directory (metadata.json, repo_snapshot/)")
                self._tasks[task_dir] = TaskSpec.from_task_dir(path)
            return self._tasks[task_dir]

    def score(self, task_dir: str, patch: str, termination: str = Termination.SUBMITTED) -> Score:
        assert self.spec is not None
        return score_patch(self.task(task_dir), patch, self.spec, self.backend, termination, secret=probe_secret())


def extract_patch(text: str) -> str:
    """The unified diff in a model's reply: from the first diff header on, fences removed."""
    match = _DIFF_START.search(text or "")
    if match is None:
        return ""
    body = _FENCE.sub("", text[match.start() :])
    return body.rstrip() + "\n"


def relevant_files(task_dir: str) -> list[str]:
    """The files the task's expected change touches (the oracle-retrieval setting of SWE-bench)."""
    expected = Path(task_dir) / "expected_patch"
    try:
        return [p.path for p in parse(expected.read_text(encoding="utf-8")) if p.path]
    except (OSError, PatchError):
        return []


def single_turn_prompt(statement: str, task_dir: str, language: str = PYTHON) -> list[dict[str, str]]:
    """The statement plus the relevant files, asking for a diff: the model writes the patch at once."""
    base = Path(task_dir) / "repo_snapshot"
    parts = [statement.strip()]
    for name in relevant_files(task_dir):
        try:
            text = (base / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        shown, _ = bound(text, MAX_FILE_CHARS)
        parts.append(f"File {name}:\n```\n{shown}\n```")
    system = patch_system_prompt(language)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def statement_of(prompt: Any) -> str:
    """The task statement in a train-file prompt (its last user message)."""
    if isinstance(prompt, str):
        return prompt
    for message in reversed(prompt or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    raise TrainerError("a prompt has no user message with the task statement")


def completion_text(completion: Any) -> str:
    """A completion as text: the assistant turns (and tool results) in order."""
    if isinstance(completion, str):
        return completion
    pieces = []
    for message in completion or []:
        content = message.get("content") or ""
        if message.get("role") == "assistant":
            pieces.append(str(content))
            for call in message.get("tool_calls") or []:
                fn = call.get("function", call)
                pieces.append(f"<tool_call>{fn.get('name')} {fn.get('arguments')}</tool_call>")
        elif message.get("role") == "tool":
            pieces.append(f"<tool_response>{bound(str(content), 500)[0]}</tool_response>")
    return "\n".join(pieces)[:MAX_COMPLETION_CHARS]


def completion_steps(completion: Any) -> list[dict[str, Any]]:
    """An agent completion as trajectory steps: each assistant turn's call and the tool's answer."""
    if isinstance(completion, str):
        return []
    steps: list[dict[str, Any]] = []
    for message in completion or []:
        if message.get("role") == "assistant":
            calls = message.get("tool_calls") or []
            fn = calls[0].get("function", calls[0]) if calls else {}
            name = fn.get("name")
            steps.append(
                {
                    "step": len(steps) + 1,
                    "action_type": str(TOOL_ACTION_TYPES.get(name, "invalid")) if name else "invalid",
                    "action_input": fn.get("arguments") if name else bound(str(message.get("content") or ""), 4000)[0],
                    "thought": bound(str(message.get("content") or ""), 4000)[0] if name else "",
                    "observation": "",
                }
            )
        elif message.get("role") == "tool" and steps and not steps[-1]["observation"]:
            steps[-1]["observation"] = bound(str(message.get("content") or ""), 4000)[0]
    return steps


def tool_call_validity(completion: Any) -> tuple[int, int]:
    """(assistant turns that made a call to a known tool, assistant turns)."""
    if isinstance(completion, str):
        return 0, 1
    valid = turns = 0
    for message in completion or []:
        if message.get("role") != "assistant":
            continue
        turns += 1
        calls = message.get("tool_calls") or []
        if calls and all(c.get("function", c).get("name") in TOOL_ACTION_TYPES for c in calls):
            valid += 1
    return valid, turns


class CrucibleEnv:
    """One agent episode's sandbox; GRPOTrainer calls its public methods as the agent's tools.

    Names and arguments are the `trajectories.tools` tools the hf policy is shown, so a policy
    trained here speaks the same dialect in rollouts. TRL pools instances and calls `reset`
    with the data row before each episode.
    """

    scorer: Scorer | None = None  # set by the trainer before the first instance is built
    command_timeout = 60.0
    _live: list[CrucibleEnv] = []

    def __init__(self) -> None:
        self.box: Sandbox | None = None
        self.task_dir = ""
        self.task_id = ""
        self.visible_tests: list[str] = []
        self.runner: LanguageRunner | None = None  # a Go or JavaScript task's test runner
        self.submitted = False
        CrucibleEnv._live.append(self)

    def reset(self, **row: Any) -> str | None:
        self._close()
        self.task_dir, self.task_id = str(row.get("task_dir") or ""), str(row.get("task_id") or "")
        self.submitted = False
        if not self.task_dir:
            return None  # the probe instance TRL builds at start-up has no task
        assert self.scorer is not None
        task = self.scorer.task(self.task_dir)
        self.visible_tests = []
        self.runner = LanguageRunner.of(task)
        self.box = Sandbox(task.base_dir, self.scorer.backend, environment=task_environment(task))
        return None

    def _close(self) -> None:
        if self.box is not None:
            box, self.box = self.box, None
            try:
                box.close()
            except SandboxError as exc:
                log(f"grpo: closing the sandbox of {self.task_id} failed: {exc}")

    def _call(self, tool: str, /, **arguments: Any) -> str:
        if self.box is None:
            return "error: no task is open"
        if self.submitted:
            return "error: already submitted"
        result = run_tool(self.box, tool, arguments, self.visible_tests, self.command_timeout, self.runner)
        return result.observation

    def read_file(self, path: str) -> str:
        """Read a file of the repository.

        Args:
            path: the file's path, relative to the repository root.
        """
        return self._call("read_file", path=path)

    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file with the given content.

        Args:
            path: the file's path, relative to the repository root.
            content: the whole new content of the file.
        """
        return self._call("write_file", path=path, content=content)

    def edit_file(self, path: str, old_text: str, new_text: str) -> str:
        """Replace one exact occurrence of old_text with new_text in a file.

        Args:
            path: the file's path, relative to the repository root.
            old_text: the exact text to replace; it must occur once.
            new_text: the text to put in its place.
        """
        return self._call("edit_file", path=path, old_text=old_text, new_text=new_text)

    def run_command(self, command: str) -> str:
        """Run a shell command in the repository (no network).

        Args:
            command: the shell command line.
        """
        return self._call("run_command", command=command)

    def search(self, pattern: str) -> str:
        """Search the repository's files for a text.

        Args:
            pattern: the text to look for.
        """
        return self._call("search", pattern=pattern)

    def search_symbol(self, name: str) -> str:
        """Find where a Python function or class is defined.

        Args:
            name: the function or class name.
        """
        return self._call("search_symbol", name=name)

    def run_tests(self, paths: list[str] | None = None) -> str:
        """Run the repository's visible tests (optionally only some paths).

        Args:
            paths: test files or node ids; all visible tests when omitted.
        """
        return self._call("run_tests", paths=paths or [])

    def submit(self) -> str:
        """Finish: your changes to the repository are the answer."""
        observation = self._call("submit")
        self.submitted = True
        return observation

    # Helpers are private: TRL offers every public method of an environment to the model as a tool.
    def _patch(self) -> str:
        if self.box is None:
            return ""
        try:
            return self.box.diff()
        except SandboxError:
            return ""

    def _finish(self) -> tuple[str, Score | None]:
        """Score the episode's diff (the workspace itself is never trusted) and close the sandbox."""
        if self.box is None or self.scorer is None:
            return "", None
        patch = self._patch()
        termination = Termination.SUBMITTED if self.submitted else Termination.MAX_STEPS
        try:
            return patch, self.scorer.score(self.task_dir, patch, termination)
        finally:
            self._close()

    @classmethod
    def close_all(cls) -> None:
        for env in cls._live:
            env._close()


atexit.register(CrucibleEnv.close_all)
