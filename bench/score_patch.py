"""score_patch on a demo task against a bare pytest run of the same tests, in one run.

The bare run is what scoring cannot avoid: pytest over the hidden tests on a patched
copy, on the host, no sandbox. Target (DESIGN.md): score_patch <= 1.3x of it.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rewards.scoring import score_patch
from rewards.spec import load_spec
from tasks.spec import TaskSpec

DEMO = Path(__file__).resolve().parent.parent / "demo" / "tasks"

TASK = os.environ.get("BENCH_SCORE_TASK", "task_0001")
RUNS = int(os.environ.get("BENCH_SCORE_RUNS", "7"))


def _bare(patch: Path, selected: list[str]) -> float:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-bare-") as name:
        work = Path(name) / "repo"
        shutil.copytree(DEMO / TASK / "repo_snapshot", work)
        subprocess.run(["git", "apply", str(patch)], cwd=work, check=True)
        shutil.copytree(DEMO / TASK / "tests", work / "tests", dirs_exist_ok=True)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *selected],
            cwd=work,
            check=True,
            capture_output=True,
            env={"PATH": os.environ["PATH"], "HOME": name},
        )
        return time.perf_counter() - started


def run() -> dict[str, Any]:
    task = TaskSpec.from_task_dir(DEMO / TASK)
    patch_path = DEMO / TASK / "expected_patch"
    patch = patch_path.read_text()
    spec = load_spec()
    selected = [*task.fail_to_pass, *task.pass_to_pass]
    bare, scored = [], []
    _bare(patch_path, selected)  # warm the page cache and .pyc-free imports alike
    for _ in range(RUNS):
        bare.append(_bare(patch_path, selected))
        started = time.perf_counter()
        result = score_patch(task, patch, spec)
        scored.append(time.perf_counter() - started)
        if result.reward != 1.0:
            raise RuntimeError(f"the expected patch scored {result.reward}")
    ratio = statistics.median(scored) / statistics.median(bare)
    return {
        "task": TASK,
        "runs": RUNS,
        "tests": len(selected),
        "bare_pytest_s": [round(s, 3) for s in bare],
        "score_patch_s": [round(s, 3) for s in scored],
        "bare_p50_s": round(statistics.median(bare), 3),
        "score_patch_p50_s": round(statistics.median(scored), 3),
        "ratio": round(ratio, 2),
        "target_ratio": 1.3,
        "summary": {
            "bare_p50_s": round(statistics.median(bare), 3),
            "score_patch_p50_s": round(statistics.median(scored), 3),
            "ratio": round(ratio, 2),
        },
    }
