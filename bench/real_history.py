"""Real history: `build_tasks --from-git --validate` over every repository of the corpus.

The corpus is tests/fixtures/real-repos/: a git bundle of recent history per real repository,
each listed in that folder's README.md table (upstream, licence, shape). Each repository is
built in a child process of its own (bench/_real_history_child.py) into a suite of its own on
a private SQLite database, with its newest MAX candidates: the repository gate first, then
each candidate judged, built and validated, then each valid task's expected patch (and the
empty one) scored with the reward.

Per repository: the gate (passed, or its reason), candidates, kept (built), skipped by reason,
valid, invalid by reason, expected = 1.0 rate, build and validation time, median statement
quality (tasks.builders.statements.quality). Over the corpus, with checks: the share of
candidates (commits that change code and tests) that became valid tasks (>= 40 %), the share of
valid tasks whose expected patch scores 1.0 (100 %), empty patches above 0 (none) and crashes
(none: a child that dies, an exception out of the command, a task that could not be validated
or scored). With the defaults it takes about 20 minutes on 2 cores (load average 5): most of it
validating the repositories with large suites (more-itertools, marko).
`BENCH_REAL_HISTORY_ONLY=sqlparse BENCH_REAL_HISTORY_MAX=40` is issue 19's acceptance run (of
sqlparse's newest 40 candidates, >= 30 valid tasks, each scoring 1.0 with its expected patch and
<= 0 with an empty one).

BENCH_REAL_HISTORY_MAX      candidates looked at per repository (default 6)
BENCH_REAL_HISTORY_RUNS     validation runs each way (default 1)
BENCH_REAL_HISTORY_JOBS     tasks validated at once (default: the command's, one per CPU)
BENCH_REAL_HISTORY_ONLY     bundles to build, comma-separated names ("sqlparse,tomli"; default all)
BENCH_REAL_HISTORY_SCORE    0 to skip scoring the valid tasks (default 1)
BENCH_REAL_HISTORY_TIMEOUT  seconds one repository may take (default 1200)
BENCH_REAL_HISTORY_SYNTH    synthetic tasks to make from sqlparse's HEAD and validate (default 0: none)
BENCH_REAL_HISTORY_STRENGTH mutants of each valid task's fix its tests are tried on (default 4; 0: no
                            test strength)
BENCH_REAL_HISTORY_TIMED    valid tasks per repository validated again alone, against the same pytest
                            runs done bare in the repository's environment (default 2; check <= 2x)
BENCH_REAL_HISTORY_LANGUAGES which corpora: python, go, javascript, comma-separated (default all three)
BENCH_REAL_HISTORY_LANG_MAX  candidates looked at per Go or JavaScript repository (default 8: with 3, one
                             repository's share can only be 0, 33, 67 or 100 %)

The Go and JavaScript/TypeScript corpora (tests/fixtures/real-repos-go/, real-repos-js/) are built
the same way (tasks.builders.lang_history: their own gate and runner, no test strength) and reported
beside the Python repositories, with figures per language: candidates, valid tasks, the share of
candidates that became valid (>= 30 %; also over the candidates the toolchain can run at all, which
leaves out commits needing a newer Go or another JavaScript runner), expected = 1.0 and validation
against the bare `go test -json` / Vitest runs (<= 2x). With the defaults that part takes a few minutes.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.checks import check, load_average

REPO = Path(__file__).resolve().parent.parent
CORPUS_DIR = REPO / "tests" / "fixtures" / "real-repos"
LANG_CORPUS_DIRS = {
    "go": REPO / "tests" / "fixtures" / "real-repos-go",
    "javascript": REPO / "tests" / "fixtures" / "real-repos-js",
}
MAX = int(os.environ.get("BENCH_REAL_HISTORY_MAX", "6"))
RUNS = int(os.environ.get("BENCH_REAL_HISTORY_RUNS", "1"))
JOBS = int(os.environ.get("BENCH_REAL_HISTORY_JOBS", "0"))
ONLY = [n for n in os.environ.get("BENCH_REAL_HISTORY_ONLY", "").split(",") if n]
SCORE = os.environ.get("BENCH_REAL_HISTORY_SCORE", "1") != "0"
TIMEOUT = int(os.environ.get("BENCH_REAL_HISTORY_TIMEOUT", "1200"))
SYNTH = int(os.environ.get("BENCH_REAL_HISTORY_SYNTH", "0"))
STRENGTH = int(os.environ.get("BENCH_REAL_HISTORY_STRENGTH", "4"))
TIMED = int(os.environ.get("BENCH_REAL_HISTORY_TIMED", "2"))
LANGUAGES = [n for n in os.environ.get("BENCH_REAL_HISTORY_LANGUAGES", "python,go,javascript").split(",") if n]
LANG_MAX = int(os.environ.get("BENCH_REAL_HISTORY_LANG_MAX", "8"))
TARGET_LANG_VALID_SHARE = 30.0
# Skips that say the toolchain here cannot run the commit at all (tasks.builders.lang_history.refusal).
RUNNER_REFUSALS = frozenset(
    {
        "no go.mod at the base (a GOPATH-era commit)",
        "go.mod asks for a newer Go than the toolchain's",
        "the go or toolchain line of go.mod is not a Go release version",
        "go.mod requires modules that are not vendored (no module proxy here)",
        "no package-lock.json at the base",
        "its package-lock.json cannot be installed here",
        "no Node here satisfies what it asks for",
        "its JavaScript test runner has no sandboxed runner yet",
    }
)
TARGET_VALIDATION_RATIO = 2.0
TARGET_VALID_SHARE = 40.0
# A row of the README's corpus table: | `name.bundle` | <https://github.com/owner/name> | SPDX | ...
CORPUS_ROW = re.compile(r"^\|\s*`(?P<bundle>[\w.-]+\.bundle)`\s*\|\s*<https://github\.com/(?P<repo>[\w.-]+/[\w.-]+)>\s*\|"
                        r"\s*(?P<licence>[\w.-]+)\s*\|")  # fmt: skip


@dataclass(frozen=True)
class CorpusRepo:
    """One repository of the corpus, as its README row names it."""

    bundle: Path
    repo: str  # owner/name upstream
    licence: str  # SPDX id, from the repository's own LICENSE file
    language: str = "python"  # which corpus: python, go or javascript

    @property
    def name(self) -> str:
        return self.bundle.name.removesuffix(".bundle")


def corpus(directory: Path = CORPUS_DIR, language: str = "python") -> list[CorpusRepo]:
    """Every repository the README's corpus table lists, in its order."""
    found = []
    for line in (directory / "README.md").read_text().splitlines():
        row = CORPUS_ROW.match(line)
        if row:
            found.append(CorpusRepo(directory / row["bundle"], row["repo"], row["licence"], language))
    return found


def all_corpora() -> list[CorpusRepo]:
    """The corpora BENCH_REAL_HISTORY_LANGUAGES names: Python's first, then Go's and JavaScript's."""
    unknown = sorted(set(LANGUAGES) - {"python", *LANG_CORPUS_DIRS})
    if unknown:
        raise ValueError(f"BENCH_REAL_HISTORY_LANGUAGES: no corpus for {unknown}")
    found = corpus() if "python" in LANGUAGES else []
    for language, directory in LANG_CORPUS_DIRS.items():
        found += corpus(directory, language) if language in LANGUAGES else []
    return found


def _one(repo: CorpusRepo, scratch: Path) -> dict[str, Any]:
    """One repository built in a child process; whatever kills the child is its crash."""
    out = scratch / f"{repo.name}.json"
    row: dict[str, Any] = {"bundle": str(repo.bundle), "repo": repo.repo, "licence": repo.licence, "name": repo.name}
    python = repo.language == "python"
    row |= {"scratch": str(scratch), "max": MAX if python else LANG_MAX, "runs": RUNS, "jobs": JOBS, "score": SCORE}
    # Test strength mutates Python fixes (libcst): not measured for Go or JavaScript.
    row |= {"strength": STRENGTH if python else 0, "timed": TIMED, "language": repo.language}
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{scratch / 'bench.sqlite3'}",
        "CRUCIBLE_VAR_DIR": str(scratch / "var"),
        "CRUCIBLE_INSTANCE": "crucible-bench-real-history",
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(REPO),
    }
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench._real_history_child", json.dumps(row), str(out)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        failure = "" if done.returncode == 0 else f"exit {done.returncode}: {done.stderr[-2000:]}"
    except subprocess.TimeoutExpired:
        failure = f"took over {TIMEOUT} s"
    if failure or not out.is_file():
        crash = failure or "no result written"
        return {"bundle": repo.bundle.name, "repo": repo.repo, "language": repo.language, "crash": crash, "tasks": {}}
    result: dict[str, Any] = json.loads(out.read_text())
    result["language"] = repo.language
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return result


def _row(result: dict[str, Any]) -> dict[str, Any]:
    """The per-repository line of the summary."""
    report = result.get("report", {})
    gate = result.get("gate") or {}
    tasks = result["tasks"].values()
    valid = [t for t in tasks if t["status"] == "valid"]
    scored = [t for t in valid if "expected" in t]
    candidates = report.get("candidates", 0)
    skipped = report.get("skipped_by_reason", {})
    refused = sum(n for why, n in skipped.items() if why in RUNNER_REFUSALS)
    return {
        "language": result.get("language", "python"),
        "gate": "passed" if gate.get("passed") else (gate.get("reason") or "did not run"),
        "gate_tests": gate.get("outcomes", {}),
        "gate_s": gate.get("seconds"),
        "candidates": candidates,
        "candidates_in_bundle": result.get("candidates_in_bundle"),
        # Candidates the toolchain can run at all: none when the gate found no commit it can run.
        "runnable": candidates - refused if gate.get("passed") else 0,
        "kept": report.get("built", 0),
        "skipped_by_reason": report.get("skipped_by_reason", {}),
        "valid": len(valid),
        "valid_share_pct": round(100 * len(valid) / candidates, 1) if candidates else None,
        "invalid_by_reason": report.get("invalid_by_reason", {}),
        "expected_1": sum(1 for t in scored if t["expected"] == 1.0),
        "scored": len(scored),
        "expected_1_rate": round(sum(1 for t in scored if t["expected"] == 1.0) / len(scored), 3) if scored else None,
        "build_s": result.get("build_s"),
        "validate_s": result.get("validate_s"),
        "statement_quality_median": result.get("statement_quality_median"),
        **_measures(valid),
        "crashes": _crashes(result),
    }


def _measures(valid: list[dict[str, Any]]) -> dict[str, Any]:
    """Test strength (median, brittle count) and validation against bare pytest (median ratio)."""
    scores = [t["strength"]["score"] for t in valid if t.get("strength", {}).get("score") is not None]
    ratios = [t["validation_vs_bare"]["ratio"] for t in valid if t.get("validation_vs_bare", {}).get("ratio")]
    return {
        "strength_median": round(statistics.median(scores), 2) if scores else None,
        "strength_measured": len(scores),
        "brittle": sum(1 for t in valid if t.get("strength", {}).get("brittle")),
        "validation_vs_bare": ratios,
    }


def _crashes(result: dict[str, Any]) -> list[str]:
    found = [f"build: {result['crash'][-300:]}"] if result.get("crash") else []
    for task_id, task in result["tasks"].items():
        if task["status"] == "error":
            found.append(f"{task_id}: could not be validated: {'; '.join(task['reasons'])[:300]}")
        if "score_crash" in task:
            found.append(f"{task_id}: could not be scored: {task['score_crash'][-300:]}")
        if "measure_crash" in task:
            found.append(f"{task_id}: strength or timing failed: {task['measure_crash'][-300:]}")
    return found


def table(rows: dict[str, dict[str, Any]]) -> str:
    """The per-repository figures as a fixed-width table, for the log and the report."""
    head = (
        f"{'repository':<16} {'lang':<4} {'gate':<10} {'cand':>4} {'kept':>4} {'valid':>5} {'exp=1':>5} {'build s':>7} "
    )
    lines = [head + f"{'valid s':>7} {'stmt q':>6} {'strength':>8} {'brittle':>7} {'vs bare':>7}  skipped / invalid"]
    for name, r in rows.items():
        gate = "passed" if r["gate"] == "passed" else "FAILED"
        expected = f"{r['expected_1']}/{r['scored']}" if r["scored"] else "-"
        why = ", ".join(f"{n} {k[:40]}" for k, n in {**r["skipped_by_reason"], **r["invalid_by_reason"]}.items())
        if r["gate"] != "passed":
            why = f"gate: {r['gate'][:80]}" + (f"; {why}" if why else "")
        strength = f"{r['strength_median']:.2f}" if r.get("strength_median") is not None else "-"
        ratios = r.get("validation_vs_bare") or []
        vs_bare = f"{statistics.median(ratios):.2f}x" if ratios else "-"
        language = r.get("language", "python")[:4]
        lines.append(
            f"{name:<16} {language:<4} {gate:<10} {r['candidates']:>4} {r['kept']:>4} {r['valid']:>5} {expected:>5} "
            f"{r['build_s'] or 0:>7.1f} {r['validate_s'] or 0:>7.1f} {r['statement_quality_median'] or 0:>6.2f} "
            f"{strength:>8} {r.get('brittle', 0):>7} {vs_bare:>7}  {why}"
        )
    return "\n".join(lines)


def _synthetic(scratch: Path) -> dict[str, Any]:
    """`synth_tasks` on sqlparse's HEAD: how many of SYNTH mutants the tests notice become valid tasks."""
    from tasks.builders.report import BuildReport
    from tasks.builders.synthetic import synthesize
    from tasks.spec import TaskSpec
    from tasks.validation import validate

    clone = scratch / "synthetic-sqlparse"
    subprocess.run(
        ["git", "clone", "-q", str(CORPUS_DIR / "sqlparse.bundle"), str(clone)], check=True, capture_output=True
    )
    started = time.perf_counter()
    report = BuildReport("synthetic_mutation", "andialbrecht/sqlparse")
    built = synthesize(clone, SYNTH, 0, scratch / "synthetic", name="andialbrecht/sqlparse", report=report)
    statuses: Counter[str] = Counter()
    for task_dir in built:
        result = validate(
            TaskSpec.from_task_dir(task_dir),
            (task_dir / "task.md").read_text(),
            (task_dir / "expected_patch").read_text(),
            declared_license="BSD-3-Clause",
            license_allowlist=["BSD-3-Clause"],
            runs=RUNS,
            source="synthetic_mutation",
        )
        statuses[result.status] += 1
    return {
        "mutants_tried": report.candidates,
        "built": len(built),
        "statuses": dict(statuses),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _language_summary(language: str, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One language's figures over its corpus repositories, and its checks."""
    mine = [r for r in rows.values() if r["language"] == language]
    candidates = sum(r["candidates"] for r in mine)
    runnable = sum(r["runnable"] for r in mine)
    valid = sum(r["valid"] for r in mine)
    scored = sum(r["scored"] for r in mine)
    expected_1 = sum(r["expected_1"] for r in mine)
    ratios = [x for r in mine for x in r["validation_vs_bare"]]
    share = 100 * valid / candidates if candidates else 0.0
    runnable_share = 100 * valid / runnable if runnable else 0.0
    # The target holds per repository, not only pooled: the repository with the least share of its own.
    per_repo = {
        name: 100 * r["valid"] / r["candidates"]
        for name, r in rows.items()
        if r["language"] == language and r["candidates"]
    }
    least = min(per_repo.items(), key=lambda item: item[1]) if per_repo else None
    expected_rate = 100 * expected_1 / scored if scored else 0.0
    runner = "go test -json" if language == "go" else "Vitest"
    summary = {
        "repositories": len(mine),
        "gate_failed": {
            name: r["gate"] for name, r in rows.items() if r["language"] == language and r["gate"] != "passed"
        },
        "candidates": candidates,
        "runnable": runnable,
        "valid": valid,
        "valid_share_pct": round(share, 1),
        "valid_share_of_runnable_pct": round(runnable_share, 1),
        "valid_share_by_repository_pct": {name: round(pct, 1) for name, pct in per_repo.items()},
        "expected_1_pct": round(expected_rate, 1),
        "validation_vs_bare": ratios,
        "validation_vs_bare_median": round(statistics.median(ratios), 2) if ratios else None,
        "skipped_by_reason": dict(sum((Counter(r["skipped_by_reason"]) for r in mine), Counter()).most_common()),
        "invalid_by_reason": dict(sum((Counter(r["invalid_by_reason"]) for r in mine), Counter()).most_common()),
    }
    checks = [
        check(f"{language}: valid tasks / candidates", share, TARGET_LANG_VALID_SHARE, better="higher", unit="%"),
        check(
            f"{language}: valid tasks / candidates the toolchain can run",
            runnable_share,
            TARGET_LANG_VALID_SHARE,
            better="higher",
            unit="%",
        ),
        check(
            f"{language}: valid tasks whose expected patch scores 1.0", expected_rate, 100.0, better="higher", unit="%"
        ),
    ]
    if least is not None:
        checks.append(
            check(
                f"{language}: valid tasks / candidates, least of one repository ({least[0]})",
                least[1],
                TARGET_LANG_VALID_SHARE,
                better="higher",
                unit="%",
            )
        )
    if ratios:
        checks.append(
            check(
                f"{language}: validation vs bare {runner}, median",
                statistics.median(ratios),
                TARGET_VALIDATION_RATIO,
                better="lower",
                unit="x",
                floor=f"the same two {runner} runs on the host, no sandbox"
                + (", a fresh build cache as each sandboxed run has" if language == "go" else ""),
            )
        )
    return {"summary": summary, "checks": checks}


def run() -> dict[str, Any]:
    listed = all_corpora()
    unknown = sorted(set(ONLY) - {r.name for r in listed})
    if unknown:
        raise ValueError(f"BENCH_REAL_HISTORY_ONLY: no such bundle {unknown}; the corpus: {[r.name for r in listed]}")
    repos = [r for r in listed if not ONLY or r.name in ONLY]
    results: dict[str, dict[str, Any]] = {}
    rows: dict[str, dict[str, Any]] = {}
    load = [load_average()]
    with tempfile.TemporaryDirectory(prefix="crucible-bench-history-") as name:
        scratch = Path(name)
        for repo in repos:
            results[repo.name] = _one(repo, scratch)
            rows[repo.name] = _row(results[repo.name])
            load.append(load_average())
            # Progress as it goes: a full run takes many minutes.
            print(f"real_history: {repo.name} {json.dumps(rows[repo.name])}", file=sys.stderr, flush=True)
        synthetic = _synthetic(scratch) if SYNTH else {}
    # The corpus-wide figures and checks below are the Python corpus's, as before; Go's and
    # JavaScript's are per language (_language_summary). Crashes and empty patches count everywhere.
    python_rows = {name: r for name, r in rows.items() if r["language"] == "python"}
    candidates = sum(r["candidates"] for r in python_rows.values())
    valid = sum(r["valid"] for r in python_rows.values())
    scored = sum(r["scored"] for r in python_rows.values())
    expected_1 = sum(r["expected_1"] for r in python_rows.values())
    languages = {lang: _language_summary(lang, rows) for lang in LANG_CORPUS_DIRS if lang in LANGUAGES}
    crashes = [f"{name}: {c}" for name, r in rows.items() for c in r["crashes"]]
    empty_above_0 = sorted(k for res in results.values() for k, t in res["tasks"].items() if t.get("empty", 0) > 0)
    expected_not_1 = sorted(
        k for res in results.values() for k, t in res["tasks"].items() if "expected" in t and t["expected"] != 1.0
    )
    share = 100 * valid / candidates if candidates else 0.0
    ratios = [x for r in python_rows.values() for x in r["validation_vs_bare"]]
    strengths = [t["strength"]["score"] for res in results.values() for t in res["tasks"].values()
                 if t.get("strength", {}).get("score") is not None]  # fmt: skip
    expected_rate = 100 * expected_1 / scored if scored else 0.0
    print(table(rows), file=sys.stderr, flush=True)
    return {
        "options": {"max": MAX, "runs_each_way": RUNS, "jobs": JOBS or "default", "score": SCORE}
        | {"strength_mutants": STRENGTH, "timed_per_repository": TIMED}
        | {"languages": LANGUAGES, "lang_max": LANG_MAX},
        "repositories": rows,
        "results": results,
        "table": table(rows),
        "synthetic": synthetic,
        "languages": {lang: found["summary"] for lang, found in languages.items()},
        "summary": {
            "repositories": len(rows),
            "gate_passed": sum(1 for r in rows.values() if r["gate"] == "passed"),
            "candidates": candidates,
            "kept": sum(r["kept"] for r in rows.values()),
            "valid": valid,
            "valid_share_pct": round(share, 1),
            "expected_1_pct": round(expected_rate, 1),
            "expected_not_1": expected_not_1,
            "empty_above_0": empty_above_0,
            "crashes": len(crashes),
            "crash_details": crashes,
            "skipped_by_reason": dict(
                sum((Counter(r["skipped_by_reason"]) for r in rows.values()), Counter()).most_common()
            ),
            "invalid_by_reason": dict(
                sum((Counter(r["invalid_by_reason"]) for r in rows.values()), Counter()).most_common()
            ),
            "median_statement_quality": round(
                statistics.median([t["statement_quality"] for res in results.values() for t in res["tasks"].values()]),
                2,
            )
            if any(res["tasks"] for res in results.values())
            else None,
            "test_strength_median": round(statistics.median(strengths), 2) if strengths else None,
            "brittle": sum(r["brittle"] for r in rows.values()),
            "validation_vs_bare_median": round(statistics.median(ratios), 2) if ratios else None,
            "synthetic_valid": synthetic.get("statuses", {}).get("valid"),
            "load_average_max": max(load),
        },
        "checks": [
            *(
                [
                    check("valid tasks / candidates, corpus", share, TARGET_VALID_SHARE, better="higher", unit="%"),
                    check(
                        "valid tasks whose expected patch scores 1.0", expected_rate, 100.0, better="higher", unit="%"
                    ),
                ]
                if python_rows
                else []
            ),
            *(c for found in languages.values() for c in found["checks"]),
            check("valid tasks whose empty patch scores > 0", len(empty_above_0), 0, better="lower"),
            check("crashes (builder, validation, scoring)", len(crashes), 0, better="lower"),
            *(
                [
                    check(
                        "validation vs bare pytest, median",
                        statistics.median(ratios),
                        TARGET_VALIDATION_RATIO,
                        better="lower",
                        unit="x",
                        floor="the same two pytest runs, host, the repository's environment",
                    )
                ]
                if ratios
                else []
            ),
        ],
    }
