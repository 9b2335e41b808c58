"""The bundled model as a policy: tokens/s by number format, how often int4's greedy tokens are
float32's, and an hf rollout of 5 steps on one demo task.

Speed: greedy, NEW_TOKENS new tokens (forced: no early stop), after a warm-up, in ROUNDS
interleaved rounds (each round runs every variant once on each prompt, back to back, so machine
load hits them alike), medians. The variants, all on the same weights under the process's torch
threads (the policy's; int4 takes one for a decoding step, trajectories.policies.quantized):

- `today`: the hf policy in float32, what it decoded in before int4 (Crucible's loader, transformers
  generate);
- `hf`: the hf policy as configured (CRUCIBLE_HF_DTYPE, default auto: int4 for the bundled model);
- `bfloat16`: the hf policy in bfloat16, what auto picked on a CPU with bfloat16 kernels before;
- `bare_float32`: plain transformers, from_pretrained and generate, no Crucible code;
- `bare_int4`: plain transformers with the int4 layers put in by hand (quantized.to_int4), no policy.

The prompts: a short chat (decoding speed) and the agent's real first prompt with the tool schemas
(~1k tokens, the prompt's prefill included: what a step costs). Checks: hf tokens/s >= 2x today's,
on each.

Agreement: greedy replies to the agent's first prompt on AGREEMENT_TASKS demo tasks, of float32
against hf's and bfloat16's: how many are the same token for token, and the share of positions
where the variant's next token (given float32's reply so far) is float32's.

Rollout: one hf trajectory of at most 5 steps on task_0001 (a private SQLite database), wall time
and the per-step model figures the batch page shows.

Runs in a child process (its own Django settings and torch threads): python -m bench model_speed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.checks import check, load_average

REPO = Path(__file__).resolve().parent.parent
NEW_TOKENS = 64
ROUNDS = 5
AGREEMENT_TASKS = 8  # demo tasks whose first prompt is replied to in both formats
AGREEMENT_TOKENS = 48
ROLLOUT_STEPS = 5
TARGET_RATIO = 2.0
FLOOR = "float32 transformers generate, same prompt, same run"


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-model-") as tmp:
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{Path(tmp) / 'bench.sqlite3'}",
            "CRUCIBLE_VAR_DIR": str(Path(tmp) / "var"),
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "HF_HUB_OFFLINE": "1",
        }
        # The child's stderr (its progress, a failure's traceback) goes straight to the console.
        done = subprocess.run(
            [sys.executable, "-m", "bench.model_speed"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            timeout=3600,
        )
    if done.returncode != 0:
        raise RuntimeError(f"model_speed child failed with exit code {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@dataclass
class Variant:
    """One way of generating: a model, and the special tokens a greedy call needs."""

    name: str
    model: Any
    eos_ids: list[int]
    pad_id: int
    number_format: str

    def seconds(self, enc: Any, n: int) -> float:
        """Seconds to generate exactly `n` tokens, greedy."""
        import torch
        from transformers import GenerationConfig

        config = GenerationConfig(
            max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=self.eos_ids, pad_token_id=self.pad_id
        )
        started = time.perf_counter()
        with torch.inference_mode():
            self.model.generate(**enc, generation_config=config)
        return time.perf_counter() - started


def _variants(model_path: str) -> list[Variant]:
    import torch
    from transformers import AutoModelForCausalLM

    from trajectories.policies import quantized
    from trajectories.policies.hf import NumberFormat, loaded_model
    from trajectories.policies.registry import hf_number_format

    variants = []
    for name, fmt in (("today", NumberFormat.FLOAT32), ("hf", hf_number_format()), ("bfloat16", NumberFormat.BFLOAT16)):
        loaded = loaded_model(model_path, fmt, "cpu")  # the first load sizes torch's threads for all
        variants.append(Variant(name, loaded.model, loaded.eos_ids, loaded.pad_id, loaded.number_format))
    eos_ids, pad_id = variants[0].eos_ids, variants[0].pad_id
    bare = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32, attn_implementation="sdpa").eval()
    variants.append(Variant("bare_float32", bare, eos_ids, pad_id, "float32"))
    bare_int4 = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32, attn_implementation="sdpa").eval()
    quantized.to_int4(bare_int4, only_if_on_grid=False)
    variants.append(Variant("bare_int4", bare_int4, eos_ids, pad_id, "int4"))
    return variants


def _chats() -> dict[str, tuple[list[dict[str, str]], Any]]:
    from trajectories.agent import SYSTEM_PROMPT
    from trajectories.tools import TOOLS

    statement = (REPO / "demo" / "tasks" / "task_0001" / "task.md").read_text()
    return {
        "short": ([{"role": "user", "content": "Write a Python function that reverses a string."}], None),
        "agent_first_step": (
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": statement}],
            TOOLS,
        ),
    }


def _speed(variants: list[Variant], tokenizer: Any) -> dict[str, Any]:
    import torch

    prompts = {
        name: tokenizer.apply_chat_template(
            chat, tools=tools, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        for name, (chat, tools) in _chats().items()
    }
    for variant in variants:
        for enc in prompts.values():
            variant.seconds(enc, 8)  # warm-up: first calls allocate and pick kernels
    seconds: dict[tuple[str, str], list[float]] = {(v.name, n): [] for v in variants for n in prompts}
    loads = []
    for round_no in range(ROUNDS):
        # Each prompt's variants back to back, in alternating order, so a spike of load lands on
        # neighbours in time, and no variant always runs first.
        order = variants if round_no % 2 == 0 else variants[::-1]
        for name, enc in prompts.items():
            for variant in order:
                seconds[variant.name, name].append(variant.seconds(enc, NEW_TOKENS))
        loads.append(load_average())
        print(f"round {round_no + 1}/{ROUNDS}, load {loads[-1]}", file=sys.stderr, flush=True)
    rows: dict[str, Any] = {}
    for variant in variants:
        rows[variant.name] = {"number_format": variant.number_format}
        for name, enc in prompts.items():
            rows[variant.name][name] = {
                "prompt_tokens": int(enc["input_ids"].shape[1]),
                "tokens_per_s": round(NEW_TOKENS / statistics.median(seconds[variant.name, name]), 2),
                "rounds_s": [round(s, 3) for s in seconds[variant.name, name]],
            }
    # Per round, so a busy round slows both sides of the ratio alike.
    ratios = {
        name: statistics.median(t / h for t, h in zip(seconds["today", name], seconds["hf", name], strict=True))
        for name in prompts
    }
    return {
        "threads": torch.get_num_threads(),
        "cores": len(os.sched_getaffinity(0)),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "new_tokens": NEW_TOKENS,
        "rounds": ROUNDS,
        "load_average_per_round": loads,
        "variants": rows,
        "hf_over_today": {name: round(r, 3) for name, r in ratios.items()},
    }


def _agreement(variants: list[Variant], tokenizer: Any) -> dict[str, Any]:
    """hf's greedy replies against float32's, and bfloat16's (auto's old pick here) for scale."""
    from trajectories.agent import SYSTEM_PROMPT
    from trajectories.tools import TOOLS

    by_name = {v.name: v for v in variants}
    today, others = by_name["today"], [by_name["hf"], by_name["bfloat16"]]
    tasks = sorted(p for p in (REPO / "demo" / "tasks").iterdir() if (p / "task.md").is_file())[:AGREEMENT_TASKS]
    tally = {v.name: Agreement() for v in others}
    for task in tasks:
        chat = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": (task / "task.md").read_text()},
        ]
        enc = tokenizer.apply_chat_template(
            chat, tools=TOOLS, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        start = int(enc["input_ids"].shape[1])
        reference = _greedy(today, enc)
        for variant in others:
            counts = tally[variant.name]
            reply = _greedy(variant, enc)
            counts.identical_replies += int(reply.equal(reference))
            shared = min(len(reference), len(reply))
            differ = (reference[start:shared] != reply[start:shared]).nonzero()
            counts.first_difference_at.append(int(differ[0]) if len(differ) else shared - start)
            predicted = _forced_next_tokens(variant.model, reference, start)
            counts.matched += int((predicted == reference[start:]).sum())
            counts.positions += len(reference) - start
    rows = {name: counts.row() for name, counts in tally.items()}
    return {"tasks": len(tasks), "max_new_tokens": AGREEMENT_TOKENS, **rows}


@dataclass
class Agreement:
    identical_replies: int = 0
    matched: int = 0  # positions where the variant's next token is float32's
    positions: int = 0
    first_difference_at: list[int] = field(default_factory=list)  # per task, tokens into the reply

    def row(self) -> dict[str, Any]:
        agreement = round(self.matched / self.positions, 4) if self.positions else None
        return {
            "identical_replies": self.identical_replies,
            "next_token_agreement": agreement,
            "positions": self.positions,
            "first_difference_at": self.first_difference_at,
        }


def _greedy(variant: Variant, enc: Any) -> Any:
    import torch
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=AGREEMENT_TOKENS, do_sample=False, eos_token_id=variant.eos_ids, pad_token_id=variant.pad_id
    )
    with torch.inference_mode():
        return variant.model.generate(**enc, generation_config=config)[0]


def _forced_next_tokens(model: Any, reference: Any, start: int) -> Any:
    """The model's greedy next token after each prefix of `reference`'s reply, decoded one token at a
    time as generate does (the prompt prefilled, then cached), so one early flip does not count every
    token after it as a difference."""
    import torch

    with torch.inference_mode():
        out = model(input_ids=reference[None, :start], use_cache=True, logits_to_keep=1)
        predicted = [out.logits[0, -1].argmax()]
        for token in reference[start:-1]:
            out = model(input_ids=token.view(1, 1), cache=out.cache, use_cache=True)
            predicted.append(out.logits[0, -1].argmax())
    return torch.stack(predicted)


def _rollout(model_path: str) -> dict[str, Any]:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tasks.models import TaskSuite
    from tasks.services import import_task_dirs
    from trajectories.batches import start_batch
    from trajectories.rollout_settings import RolloutSettings
    from trajectories.runner import run_trajectory

    import_task_dirs(REPO / "demo" / "tasks" / "task_0001", "bench-model")
    batch = start_batch(
        TaskSuite.objects.get(name="bench-model"),
        RolloutSettings("hf", model_path, max_steps=ROLLOUT_STEPS, temperature=0.0, max_new_tokens=128),
        enqueue=False,
    )
    started = time.perf_counter()
    trajectory = run_trajectory(batch.trajectories.get().pk)
    wall = time.perf_counter() - started
    assert trajectory is not None
    calls = [s.extra.get("model") or {} for s in trajectory.steps.order_by("step")]
    return {
        "task": "task_0001",
        "status": trajectory.status,
        "termination": trajectory.termination,
        "error": trajectory.error[:300],
        "steps": trajectory.step_count,
        "wall_s": round(wall, 2),
        "model_s": round(sum(c.get("generate_ms", 0.0) for c in calls) / 1000, 2),
        "sandbox_s": round(float(trajectory.sandbox.get("sandbox_ms", 0.0)) / 1000, 2),
        "per_step": [
            {k: c.get(k) for k in ("prompt_tokens", "completion_tokens", "generate_ms", "tokens_per_s")} for c in calls
        ],
    }


def _child() -> None:
    sys.path.insert(0, str(REPO))
    from django.conf import settings

    # Before anything loads torch: the policy's module sets up torch's OpenMP (OMP_WAIT_POLICY).
    import trajectories.policies.hf  # noqa: F401

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    model_path = str(settings.CRUCIBLE_DEFAULT_MODEL)
    load_at_start = load_average()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    variants = _variants(model_path)
    speed = _speed(variants, tokenizer)
    agreement = _agreement(variants, tokenizer)
    del variants  # the rollout's policy finds its model in the process cache; the bare copies can go
    rollout = _rollout(model_path)
    rows = speed["variants"]
    checks = [
        check(
            f"hf tokens/s vs today's path ({name})",
            speed["hf_over_today"][name],
            TARGET_RATIO,
            better="higher",
            unit="x",
            floor=FLOOR,
        )
        for name in ("short", "agent_first_step")
    ]
    result = {
        "model": model_path,
        "load_average_at_start": load_at_start,
        "speed": speed,
        "agreement": agreement,
        "rollout": rollout,
        "checks": checks,
        "summary": {
            "hf_number_format": rows["hf"]["number_format"],
            "hf_tokens_per_s": rows["hf"]["short"]["tokens_per_s"],
            "today_tokens_per_s": rows["today"]["short"]["tokens_per_s"],
            "hf_agent_step_tokens_per_s": rows["hf"]["agent_first_step"]["tokens_per_s"],
            "today_agent_step_tokens_per_s": rows["today"]["agent_first_step"]["tokens_per_s"],
            "hf_over_today": speed["hf_over_today"],
            "next_token_agreement": agreement["hf"]["next_token_agreement"],
            "identical_replies": f"{agreement['hf']['identical_replies']}/{agreement['tasks']}",
            "rollout_steps": rollout["steps"],
            "rollout_wall_s": rollout["wall_s"],
            "load_average": max(speed["load_average_per_round"]),
        },
    }
    print(json.dumps(result))


if __name__ == "__main__":
    _child()
