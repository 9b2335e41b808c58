from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from training.serving import ServeError, policy_checkpoint, serve_checkpoint


class Command(BaseCommand):
    help = (
        "Serve a policy checkpoint through `transformers serve` (OpenAI-compatible) on loopback, "
        "for rollouts with the openai policy. Runs until interrupted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("checkpoint", help="a policy checkpoint's id or name")
        parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            checkpoint = policy_checkpoint(options["checkpoint"])
        except ServeError as exc:
            raise CommandError(str(exc)) from None
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            with serve_checkpoint(checkpoint, port=options["port"]) as server:
                self.stdout.write(
                    f"serving checkpoint #{checkpoint.pk} {checkpoint.name} at {server.base_url}/v1 "
                    f"(ready in {server.started_s:.1f} s)\n"
                    f"roll out with it: python manage.py rollout --policy openai --base-url {server.base_url} "
                    f"--model {server.model} --suite SUITE\n"
                )
                self.stdout.flush()
                try:
                    stop.wait()
                except KeyboardInterrupt:
                    pass
        except RuntimeError as exc:  # the server did not come up: its log tail says why
            raise CommandError(str(exc)) from None
