"""OpenHands trajectories: the event list `--save-trajectory-path` writes, or an evaluation
`output.jsonl` line (`{"instance_id", "history": [events], "test_result": {"git_patch"}, ...}`).

An event is an action (`"action": "run" | "read" | "write" | "edit" | "finish" | "message" ...`,
with `args`) or an observation (`"observation": ...`, `"content"`, `"cause"`: the action's id).
"""

from __future__ import annotations

from typing import Any

from core.vocabulary import ActionType, Termination
from trajectories.interchange.common import InterchangeError, mapping, record, sequence, shell_step, text

FORMAT = "openhands"
# Actions that are not tool calls: the agent talking or thinking. Their text becomes the next step's thought.
TALK = frozenset({"message", "think", "system", "recall", "change_agent_state"})


def _action(kind: str, args: dict[str, Any], where: str) -> tuple[str, Any]:
    if kind in ("run", "run_ipython"):
        return ActionType.RUN_COMMAND, {
            "command": text(args.get("command") or args.get("code"), f"{where}.args.command")
        }
    if kind == "read":
        return ActionType.READ_FILE, {"path": text(args.get("path"), f"{where}.args.path")}
    if kind == "write":
        return ActionType.WRITE_FILE, {
            "path": text(args.get("path"), f"{where}.args.path"),
            "content": text(args.get("content"), f"{where}.args.content"),
        }
    if kind == "edit" and args.get("old_str") is not None:
        return ActionType.EDIT_FILE, {
            "path": text(args.get("path"), f"{where}.args.path"),
            "old_text": text(args.get("old_str"), f"{where}.args.old_str"),
            "new_text": text(args.get("new_str"), f"{where}.args.new_str"),
        }
    if kind == "finish":
        return ActionType.SUBMIT, None
    return (
        shell_step(text(args.get("command"), f"{where}.args.command"))
        if args.get("command")
        else (
            ActionType.INVALID,
            f"{kind}: {args}"[:2000],
        )
    )


def convert(raw: Any, content: bytes, task_id: str) -> dict[str, Any]:
    if isinstance(raw, dict) and isinstance(raw.get("history"), list):
        events, wrapper = raw["history"], raw
    elif isinstance(raw, list):
        events, wrapper = raw, {}
    else:
        raise InterchangeError("not an OpenHands trajectory (an event list, or an object with history)")
    events = [mapping(e, f"history[{i}]") for i, e in enumerate(sequence(events, "history"))]
    observations = {e.get("cause"): e for e in events if "observation" in e and e.get("cause") is not None}
    prompt, thought, model = "", "", ""
    steps: list[dict[str, Any]] = []
    terminated = ""
    for index, event in enumerate(events):
        kind = event.get("action")
        if not isinstance(kind, str):
            continue
        where = f"history[{index}]"
        args = mapping(event.get("args"), f"{where}.args")
        if kind in TALK:
            said = text(args.get("content") or args.get("thought"), f"{where}.args.content")
            if event.get("source") == "user" and not prompt:
                prompt = said
            elif event.get("source") == "agent":
                thought = "\n".join(t for t in (thought, said) if t)
            continue
        action_type, action_input = _action(kind, args, where)
        result = observations.get(event.get("id"), {})
        metadata = mapping(mapping(result.get("extras"), f"{where} observation extras").get("metadata"), "metadata")
        code = metadata.get("exit_code")
        steps.append(
            {
                "step": len(steps) + 1,
                "action_type": action_type,
                "action_input": action_input,
                "observation": text(result.get("content"), f"{where} observation content"),
                "thought": "\n".join(t for t in (thought, text(args.get("thought"), f"{where}.args.thought")) if t),
                "exit_code": code if isinstance(code, int) and not isinstance(code, bool) else None,
                "timestamp": event.get("timestamp") if isinstance(event.get("timestamp"), str) else None,
                "source_action": kind,
            }
        )
        thought = ""
        if kind == "finish":
            terminated = Termination.SUBMITTED
    metadata = mapping(wrapper.get("metadata"), "metadata")
    llm = mapping(metadata.get("llm_config"), "metadata.llm_config")
    model = llm.get("model", "") if isinstance(llm.get("model"), str) else ""
    test_result = mapping(wrapper.get("test_result"), "test_result")
    return record(
        fmt=FORMAT,
        content=content,
        task_id=text(wrapper.get("instance_id"), "instance_id") or task_id,
        prompt=text(wrapper.get("instruction"), "instruction") or prompt,
        model=model,
        steps=steps,
        patch=text(test_result.get("git_patch"), "test_result.git_patch"),
        termination=terminated,
        info={"agent_class": metadata.get("agent_class", "")} if metadata else {},
    )
