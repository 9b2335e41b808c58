from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from webapp.demo_checks import start_demo_checks


class Command(BaseCommand):
    help = "On the first start, queue a validation run and a reward check of each demo suite (once)."

    def handle(self, *args: Any, **options: Any) -> None:
        queued = start_demo_checks()
        if queued.validations or queued.reward_checks:
            self.stdout.write(
                f"demo checks queued (the dashboard shows them): validation of {', '.join(queued.validations) or '-'}; "
                f"reward check of {', '.join(queued.reward_checks) or '-'}"
            )
        for reason in queued.skipped:
            self.stdout.write(f"demo check not queued: {reason}")
