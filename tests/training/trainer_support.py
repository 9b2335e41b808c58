"""What the trainer tests share: a tiny model with the bundled tokenizer, demo data, running a run.

The tiny model is the bundled SmolLM2's architecture and tokenizer (chat template included) at
3M parameters, so each kind trains for real in seconds; the learning check (bench/learning.py)
trains the bundled model itself.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from training.trainers.__main__ import main
from trajectories.conversation import TOOLS, RecordedStep, conversation, prompt_messages

REPO = Path(__file__).resolve().parent.parent.parent
BUNDLED = REPO / "var" / "models" / "smollm2-135m-instruct"
DEMO = REPO / "demo"


def make_tiny_reward_model(base: Path, dest: Path) -> Path:
    """A sequence-classification head on the tiny model: an untrained but real reward model."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    model.save_pretrained(dest)
    AutoTokenizer.from_pretrained(base).save_pretrained(dest)
    return dest


def make_tiny_model(dest: Path) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(BUNDLED)
    config.update(
        {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
        }
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(dest)
    AutoTokenizer.from_pretrained(BUNDLED).save_pretrained(dest)
    return dest


SUBMIT = '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>'
COMMAND = '<tool_call>\n{"name": "run_command", "arguments": {"command": "ls"}}\n</tool_call>'


def make_mixed_policy(dest: Path, task: str = "task_0001") -> Path:
    """The tiny model, trained until its first reply on a demo task is SUBMIT or COMMAND, about evenly.

    GRPO needs groups whose rewards differ: an empty submitted patch scores 0, a command run to
    max_steps costs the early-termination penalty. About 30 s on two cores.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    make_tiny_model(dest)
    tokenizer = AutoTokenizer.from_pretrained(dest)
    model = AutoModelForCausalLM.from_pretrained(dest)
    prompt = tokenizer.apply_chat_template(
        prompt_messages((DEMO / "tasks" / task / "task.md").read_text()),
        tools=list(TOOLS),  # type: ignore[arg-type]
        add_generation_prompt=True,
        tokenize=False,
    )
    head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    examples = []
    for answer in (SUBMIT, COMMAND):
        tail = tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        examples.append((torch.tensor([head + tail]), len(head), torch.tensor(tail)))
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(150):
        for ids, start, tail in examples:
            # The head only where the answer is: logits over the whole prompt would cost minutes.
            hidden = model.model(input_ids=ids).last_hidden_state[0, start - 1 : -1]
            torch.nn.functional.cross_entropy(model.lm_head(hidden), tail).backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(dest)
    return dest


def demo_trajectories() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (DEMO / "trajectories.jsonl").read_text().splitlines() if line.strip()]
    return [row for row in rows if "schema_version" in row]


def chat_of(trajectory: dict[str, Any], steps: int | None = None) -> list[dict[str, Any]]:
    recorded = [
        RecordedStep(s["action_type"], s["action_input"], s.get("thought", ""), s.get("observation", ""))
        for s in trajectory["steps"][:steps]
    ]
    return conversation(trajectory["prompt"], recorded)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def sft_rows() -> list[dict[str, Any]]:
    """The demo's verified successes as the hf policy's chat (rejection sampling's input)."""
    return [{"messages": chat_of(t, 2), "tools": TOOLS} for t in demo_trajectories() if t.get("success")][:2]


def short_sft_rows(count: int = 4) -> list[dict[str, Any]]:
    """Short conversations (tens of tokens): many steps of the tiny model take seconds."""
    return [
        {
            "messages": [
                {"role": "user", "content": f"Fix the off-by-one in range_sum (case {n})."},
                {"role": "assistant", "content": f"Use range(a, b + {n}) so that b is included."},
            ]
        }
        for n in range(count)
    ]


def preference_rows(long_pair: bool = False) -> list[dict[str, Any]]:
    good = [t for t in demo_trajectories() if t.get("success")]
    bad = next(t for t in demo_trajectories() if not t.get("success"))
    rows = []
    for trajectory in good[:2]:
        prompt = prompt_messages(trajectory["prompt"])
        rows.append(
            {
                "prompt": prompt,
                "chosen": chat_of(trajectory, 1)[len(prompt) :],
                "rejected": chat_of(bad, 1)[len(prompt) :],
                "tools": "[]",
                "chosen_trajectory_id": trajectory["trajectory_id"],
            }
        )
    if long_pair:
        rows.append({**rows[0], "chosen": [{"role": "assistant", "content": "word " * 6000}]})
    return rows


def grpo_rows(task_ids: tuple[str, ...] = ("task_0001",)) -> list[dict[str, Any]]:
    rows = []
    for task_id in task_ids:
        task_dir = DEMO / "tasks" / task_id
        rows.append(
            {
                "prompt": prompt_messages((task_dir / "task.md").read_text()),
                "task_id": task_id,
                "task_dir": str(task_dir),
            }
        )
    return rows


def run_config(
    run_dir: Path, kind: str, model: Path, train_file: Path, rl: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "kind": kind,
        "model": {"base_model": str(model)},
        "rl": {"max_steps": 1, "batch_size": 2, "learning_rate": 1e-3, **rl},
        "data": {"train_file": str(train_file)},
        "logging": {"save_every_steps": 1},
        "output_dir": str(run_dir / "out"),
        **extra,
    }
    (run_dir / "config.json").write_text(json.dumps(config))
    return config


def train_in_process(run_dir: Path) -> tuple[int, list[dict[str, Any]]]:
    """main() as the subprocess runs it; the events it printed, parsed."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = main([str(run_dir)])
    return code, parse_events(out.getvalue())


def train_in_subprocess(run_dir: Path) -> list[dict[str, Any]]:
    """`python -m training.trainers RUN_DIR`, the launcher's command, run to success; its events."""
    done = subprocess.run(
        [sys.executable, "-m", "training.trainers", str(run_dir)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return parse_events(done.stdout)


def parse_events(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "event" in record:
            events.append(record)
    return events


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == kind]
