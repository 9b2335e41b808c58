"""Environments (issue 19): what building a repository's environment costs, and what it costs after.

A fixture repository with a `src/` layout and one runtime dependency from the registry: its
environment is detected, built cold (pip from the registry into a fresh root), then looked up
warm (what every later task and build pays), turned into a docker image when an engine is
reachable, and its tests run in a sandbox on it next to the bare runner. Plain Python.

BENCH_ENV_REQUIREMENTS   extra requirements for the fixture (default "six>=1.16"), comma-separated
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sandbox import Sandbox
from sandbox.environments import ROOT_ENV, ensure_environment
from tasks.builders.environment import detect_environment

REQUIREMENTS = [r for r in os.environ.get("BENCH_ENV_REQUIREMENTS", "six>=1.16").split(",") if r]
SOURCE = "import six\n\n\ndef describe(value):\n    return six.text_type(value)\n"
TEST = "from calc import describe\n\n\ndef test_describe():\n    assert describe(2) == '2'\n"


def _fixture(root: Path) -> Path:
    repo = root / "calc"
    (repo / "src" / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    deps = ", ".join(f'"{r}"' for r in REQUIREMENTS)
    (repo / "pyproject.toml").write_text(f'[project]\nname = "calc"\nversion = "0.1"\ndependencies = [{deps}]\n')
    (repo / "src" / "calc" / "__init__.py").write_text(SOURCE)
    (repo / "tests" / "test_calc.py").write_text(TEST)
    return repo


def _median_ms(call: Any, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="crucible-bench-env-") as name:
        scratch = Path(name)
        before = os.environ.get(ROOT_ENV)
        os.environ[ROOT_ENV] = str(scratch / "envs")
        try:
            repo = _fixture(scratch)
            detect_ms = _median_ms(lambda: detect_environment(repo), 5)
            spec = detect_environment(repo).spec
            assert spec is not None
            started = time.perf_counter()
            env = ensure_environment(spec)
            cold_s = time.perf_counter() - started
            warm_ms = _median_ms(lambda: ensure_environment(spec), 20)

            def tests(environment: Any) -> float:
                with Sandbox(repo, "bwrap", environment=environment) as box:
                    started = time.perf_counter()
                    report = box.run_tests()
                    took = time.perf_counter() - started
                assert environment is None or report.outcome("tests/test_calc.py::test_describe") == "passed"
                return took * 1000

            with_env = statistics.median(tests(env) for _ in range(5))
            bare = statistics.median(tests(None) for _ in range(5))
            image: dict[str, Any] = {}
            try:
                from sandbox.backends.docker import DockerBackend
                from sandbox.podman import podman_service

                with podman_service() as url:
                    backend = DockerBackend(base_url=url)
                    started = time.perf_counter()
                    tag = backend.ensure_environment_image(env)
                    image = {"tag": tag, "import_s": round(time.perf_counter() - started, 2)}
                    image["cached_ms"] = _median_ms(lambda: backend.ensure_environment_image(env), 5)
                    backend.close()
            except Exception as exc:  # noqa: BLE001 - the image figures are optional; say why they are missing
                image = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            if before is None:
                os.environ.pop(ROOT_ENV, None)
            else:
                os.environ[ROOT_ENV] = before
    return {
        "requirements": list(spec.requirements),
        "packages": list(env.lock),
        "detect_ms": detect_ms,
        "build_cold_s": round(cold_s, 2),
        "lookup_warm_ms": warm_ms,
        "size_mb": round(env.size_bytes / 1e6, 1),
        "test_run_ms": {"with_environment": round(with_env, 1), "bare_runner": round(bare, 1)},
        "docker_image": image,
    }
