"""Scoring a patch on a task whose verifier is its own script (tasks.script_verifier).

The admission rules are the pytest tasks' own (rewards.admission): protected paths, new tests
and what the spec refuses are set aside, never applied. The kept rest goes onto a fresh copy
of the base in a fresh sandbox, the task's script runs over it with /tests and /logs bound
from the harness's side, and its reward file is read as hostile output. What the pytest
reward adds (sentinels, twins, the second run with changed expected values, held-out calls)
needs test lists a script does not have: it is not applied here, and the breakdown says so.
"""

from __future__ import annotations

from core.vocabulary import Detector, Termination
from rewards.anticheat import Flag
from rewards.scoring import EARLY_TERMINATIONS, Score, _dedupe, admit_patch, apply_admitted, policy_bound
from rewards.spec import RewardSpec
from sandbox import Limits, Sandbox
from sandbox.backends.base import Backend
from tasks.script_verifier import run_verifier
from tasks.spec import TaskSpec

NOT_APPLIED = "sentinels, twins, changed expected values and held-out calls need pytest test lists"


def score_script_patch(
    task: TaskSpec,
    patch: str,
    spec: RewardSpec,
    backend: Backend | str,
    termination: str = Termination.SUBMITTED,
    limits: Limits | None = None,
) -> Score:
    admission, flags, breakdown = admit_patch(task, patch, spec)
    run_limits = (limits or Limits()).with_timeout(task.timeout_seconds)
    with Sandbox(task.base_dir, backend, limits=run_limits) as box:
        apply_admitted(box, admission, flags, breakdown)
        run = run_verifier(box, task)
    if run.exec.timed_out:
        flags.append(Flag(Detector.TIMEOUT, f"the verifier passed its {task.timeout_seconds} s limit"))
    # A link or FIFO where the reward goes: the report cannot be read. A reward file the script
    # does not write, a process that outlived its parent, a supervisor silenced before its
    # verdict: only code in the run can have done it, and the agent's is the only stranger there.
    flags += [Flag(Detector.UNSAFE_REPORT, problem) for problem in run.problems]
    flags += [Flag(Detector.FORGED_TEST_RUN, problem) for problem in run.tampered]
    flags = _dedupe(flags)
    breakdown["test_run_valid"] = run.valid
    reward = run.reward
    breakdown["outcome"] = reward
    breakdown["script_verifier"] = {
        "rewards": dict(list(run.rewards.items())[:100]),
        "exit_code": run.exec.exit_code,
        "not_applied": NOT_APPLIED,
    }
    outcome = spec.outcome
    if termination in EARLY_TERMINATIONS:
        reward += outcome["early_termination_penalty"]
        breakdown["early_termination"] = outcome["early_termination_penalty"]
    reward, hit = policy_bound(reward, flags, spec)
    breakdown["policies"] = sorted(hit)
    breakdown["duration_ms"] = run.exec.duration_ms
    resolved = run.valid and reward >= 1.0
    pass_rate = max(0.0, min(1.0, run.reward))
    return Score(
        task.task_id, round(reward, 6), resolved, round(pass_rate, 6), 0, 0, 0, 0, flags, breakdown, spec.version
    )
