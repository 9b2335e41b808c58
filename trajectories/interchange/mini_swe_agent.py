"""mini-swe-agent `.traj.json`: `{"info": {exit_status, submission, model_stats, config},
"messages": [system, user (the task), assistant, user (the output), ...], "trajectory_format"}`.

Each assistant message carries one bash block (```bash ... ```, or the tool call of v2's
tool-calling models); the user message after it is the output, `<returncode>N</returncode>`
followed by `<output>...</output>`.
"""

from __future__ import annotations

import re
from typing import Any

from core.vocabulary import ActionType, Termination
from trajectories.interchange.common import InterchangeError, mapping, record, sequence, shell_step, text

FORMAT = "mini-swe-agent"
BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n?```", re.DOTALL)
RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
OUTPUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.DOTALL)
# What mini-swe-agent's final command echoes first (older and newer spellings).
SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
EXITS = {
    "Submitted": Termination.SUBMITTED,
    "LimitsExceeded": Termination.MAX_STEPS,
    "TimeoutError": Termination.TIMEOUT,
}


def _content(message: dict[str, Any], where: str) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return text(content, f"{where}.content")


def _command(message: dict[str, Any], body: str) -> str | None:
    calls = message.get("tool_calls")
    if isinstance(calls, list) and len(calls) == 1 and isinstance(calls[0], dict):
        arguments = mapping(calls[0].get("function"), "tool_calls[0].function").get("arguments")
        if isinstance(arguments, str):
            found = re.search(r'"command"\s*:\s*"((?:[^"\\]|\\.)*)"', arguments)
            if found:
                return found.group(1).encode().decode("unicode_escape")
    blocks = BLOCK.findall(body)
    return blocks[0] if len(blocks) == 1 else None


def _model(info: dict[str, Any]) -> str:
    model = mapping(mapping(info.get("config"), "info.config").get("model"), "info.config.model")
    name = model.get("model_name", "")
    return name if isinstance(name, str) else ""


def convert(raw: Any, content: bytes, task_id: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("messages"), list):
        raise InterchangeError("not a mini-swe-agent trajectory (no messages list)")
    info = mapping(raw.get("info"), "info")
    messages = [mapping(m, f"messages[{i}]") for i, m in enumerate(sequence(raw["messages"], "messages"))]
    prompt = next((_content(m, "messages") for m in messages if m.get("role") == "user"), "")
    steps: list[dict[str, Any]] = []
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages))
    for index in range(first_user + 1, len(messages)):
        message = messages[index]
        if message.get("role") != "assistant":
            continue
        body = _content(message, f"messages[{index}]")
        reply = (
            messages[index + 1] if index + 1 < len(messages) and messages[index + 1].get("role") != "assistant" else {}
        )
        output = _content(reply, f"messages[{index + 1}]") if reply else ""
        command = _command(message, body)
        code = RETURNCODE.search(output)
        shown = OUTPUT.search(output)
        step: dict[str, Any] = {
            "step": len(steps) + 1,
            "thought": BLOCK.sub("", body).strip(),
            "observation": shown.group(1) if shown else output,
            "exit_code": int(code.group(1)) if code else None,
        }
        if command is None:
            # No single bash block: mini-swe-agent answered with a format error, as our invalid step.
            step |= {"action_type": ActionType.INVALID, "action_input": body}
        elif any(marker in command for marker in SUBMIT_MARKERS):
            step |= {"action_type": ActionType.SUBMIT, "action_input": None, "source_action": command}
        else:
            action_type, action_input = shell_step(command)
            step |= {"action_type": action_type, "action_input": action_input, "source_action": command}
        steps.append(step)
    status = text(info.get("exit_status"), "info.exit_status")
    return record(
        fmt=FORMAT,
        content=content,
        task_id=task_id,
        prompt=prompt,
        model=_model(info),
        steps=steps,
        patch=text(info.get("submission"), "info.submission"),
        termination=EXITS.get(status, Termination.ERROR if status else ""),
        info={k: info[k] for k in ("exit_status", "model_stats", "mini_version") if k in info}
        | {"trajectory_format": raw.get("trajectory_format", "")},
    )
