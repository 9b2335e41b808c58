"""`python -m sandbox exec --backend bwrap --workspace DIR [--timeout S] -- CMD...`

Runs one command in a fresh sandbox over a copy of DIR and prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sandbox.backends.base import SandboxError
from sandbox.core import Sandbox, make_backend
from sandbox.names import DEFAULT_BACKEND, BackendName


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("exec", help="run one command in a fresh sandbox over a copy of a directory")
    ex.add_argument("--backend", choices=list(BackendName), default=DEFAULT_BACKEND)
    ex.add_argument("--workspace", type=Path, required=True)
    ex.add_argument("--timeout", type=float, default=60.0)
    ex.add_argument("--allow-unsafe-local", action="store_true", help="let the local backend run (no isolation)")
    ex.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("no command given (put it after --)")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    try:
        backend = make_backend(args.backend, allow_unsafe=args.allow_unsafe_local)
        with Sandbox(args.workspace, backend) as box:
            result = box.exec(cmd, timeout=args.timeout)
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = result.to_json()
    print(
        json.dumps(
            {
                k: out[k]
                for k in ("exit_code", "stdout", "stderr", "truncated", "timed_out", "duration_ms", "startup_ms")
            }
            | {"killed_by": out["killed_by"]}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
