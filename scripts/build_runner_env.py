"""Build the sandbox's test-runner venv (pytest and its requirements only) ahead of first use.

The sandbox builds it on demand too (sandbox/runner_env.py); `make setup` runs this so the
first sandbox of a fresh checkout does not pay for it. Offline: the files come from the
distributions already installed beside Crucible. Prints the venv's path.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.runner_env import RunnerEnvError, ensure_runner_env  # noqa: E402 - after the path fix above


def main() -> int:
    try:
        print(ensure_runner_env())
    except (RunnerEnvError, OSError) as exc:
        print(f"build_runner_env: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
