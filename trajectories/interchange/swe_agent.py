"""SWE-agent `.traj` files: `{"trajectory": [{action, observation, response, thought, ...}],
"history": [...chat...], "info": {submission, exit_status, model_stats}, "replay_config": ...}`."""

from __future__ import annotations

import json
from typing import Any

from core.vocabulary import ActionType, Termination
from trajectories.interchange.common import InterchangeError, mapping, record, sequence, shell_step, text

FORMAT = "swe-agent"
# exit_status values SWE-agent writes ("submitted", "submitted (exit_cost)", "exit_context", ...).
EXITS = {"submitted": Termination.SUBMITTED, "exit_cost": Termination.MAX_STEPS, "exit_context": Termination.MAX_STEPS}


def _termination(status: str) -> str:
    if status.startswith("submitted"):
        return Termination.SUBMITTED
    return EXITS.get(status, Termination.ERROR if status else "")


def _model(raw: dict[str, Any]) -> str:
    config = raw.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            return ""
    model = mapping(mapping(config, "replay_config").get("agent"), "replay_config.agent").get("model")
    name = mapping(model, "replay_config.agent.model").get("name", "") if isinstance(model, dict) else ""
    return name if isinstance(name, str) else ""


def _prompt(history: list[Any]) -> str:
    for message in history:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # the multimodal form: a list of {"type": "text", "text": ...}
                return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def convert(raw: Any, content: bytes, task_id: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or "trajectory" not in raw:
        raise InterchangeError("not a SWE-agent .traj (no top-level trajectory list)")
    info = mapping(raw.get("info"), "info")
    steps = []
    for index, entry in enumerate(sequence(raw["trajectory"], "trajectory")):
        where = f"trajectory[{index}]"
        entry = mapping(entry, where)
        action = text(entry.get("action"), f"{where}.action")
        action_type, action_input = shell_step(action)
        if action_type == ActionType.INVALID:
            action_input = text(entry.get("response"), f"{where}.response")
        seconds = entry.get("execution_time")
        steps.append(
            {
                "step": index + 1,
                "action_type": action_type,
                "action_input": action_input,
                "observation": text(entry.get("observation"), f"{where}.observation"),
                "thought": text(entry.get("thought"), f"{where}.thought"),
                "duration_ms": float(seconds) * 1000 if isinstance(seconds, (int, float)) else None,
                "source_action": action,
            }
        )
    return record(
        fmt=FORMAT,
        content=content,
        task_id=task_id,
        prompt=_prompt(sequence(raw.get("history"), "history")),
        model=_model(raw),
        steps=steps,
        patch=text(info.get("submission"), "info.submission"),
        termination=_termination(text(info.get("exit_status"), "info.exit_status")),
        info={k: info[k] for k in ("exit_status", "model_stats", "swe_agent_version") if k in info},
    )
