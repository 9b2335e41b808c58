"""Serve a local model (the bundled one, or a trained checkpoint) with `transformers serve`.

A real OpenAI-compatible server for the `openai` policy: `serve_checkpoint` uses it for
checkpoints, the tests for the bundled model. The server runs in its own process group on
a loopback port, is polled until it answers with the model loaded, and is stopped together
with anything it spawned.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from sandbox.process import stop_group


@dataclass
class ModelServer:
    base_url: str  # http://127.0.0.1:PORT (no /v1)
    model: str  # the name requests must use: the server is pinned to this model
    log_path: Path
    started_s: float  # seconds until it answered

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve_command(model_dir: str, port: int) -> list[str]:
    exe = Path(sys.executable).with_name("transformers")  # the venv's CLI, whatever PATH says
    cli = [str(exe)] if exe.exists() else [sys.executable, "-m", "transformers.cli.transformers"]
    # Pinning the model (FORCE_MODEL) loads it at start-up, so "ready" means ready to generate.
    return [
        *cli,
        "serve",
        model_dir,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--log-level",
        "warning",
    ]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    stop_group(proc, term_wait_s=15.0, kill_wait_s=5.0)  # the group: uvicorn may have spawned workers


@contextmanager
def serve_model(model_dir: str | Path, port: int | None = None, startup_timeout: float = 240) -> Iterator[ModelServer]:
    model = str(model_dir)
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TQDM_DISABLE": "1",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    }
    log = tempfile.NamedTemporaryFile(prefix="transformers-serve-", suffix=".log", delete=False)  # noqa: SIM115
    log_path = Path(log.name)
    started = time.monotonic()
    proc = subprocess.Popen(
        _serve_command(model, port),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    server = ModelServer(base_url, model, log_path, 0.0)
    try:
        deadline = started + startup_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"transformers serve exited with {proc.returncode} before answering:\n{server.log_tail()}"
                )
            try:
                if httpx.get(f"{base_url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"transformers serve did not answer within {startup_timeout:g} s:\n{server.log_tail()}"
                )
            time.sleep(0.5)
        server.started_s = time.monotonic() - started
        yield server
    finally:
        _stop(proc)
        log_path.unlink(missing_ok=True)
