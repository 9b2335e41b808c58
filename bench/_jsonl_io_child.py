"""The measured half of bench/jsonl_io.py, run in a fresh process so its peak RSS is the command's own:

    python -m bench._jsonl_io_child import|export|clear PATH

Prints: seconds, the RSS after setup (KiB), the peak RSS (KiB).
"""

from __future__ import annotations

import os
import resource
import sys
import time

import django


def main(argv: list[str]) -> int:
    op, path = argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    django.setup()
    from django.core.management import call_command

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if op == "import":
        call_command("import_trajectories", path, "--allow-unknown-tasks", verbosity=0)
    elif op == "export":
        call_command("export", "trajectories", "--out", path, verbosity=0)
    elif op == "clear":
        from trajectories.models import Step, Trajectory

        Step.objects.all().delete()
        Trajectory.objects.all().delete()
    else:
        raise SystemExit(f"unknown operation {op!r} (import, export or clear)")
    elapsed = time.perf_counter() - started
    print(elapsed, base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
