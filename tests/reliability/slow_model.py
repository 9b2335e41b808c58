"""A real OpenAI-compatible model server on loopback that takes its time: each answer comes after
`delay` seconds, as a big model's generation on a busy machine does.

It plays a two-step agent (read the file, then submit) and marks each answer's thought with the
number of the request it answers, so a test can tell which attempt's step reached the database.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class SlowModel:
    url: str = ""
    delay: float = 1.0
    served: int = 0
    in_flight: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def marker(self, number: int) -> str:
        return f"model request {number}"

    def wait_in_flight(self, timeout: float) -> int:
        """The number of a request the server is answering now (it waits in its delay)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.in_flight:
                    return min(self.in_flight)
            time.sleep(0.02)
        raise AssertionError(f"no model request in flight within {timeout:g} s")


def _answer(number: int, messages: list[dict[str, object]], model: SlowModel) -> dict[str, object]:
    read_already = any(m.get("role") == "tool" for m in messages)
    name, arguments = ("submit", {}) if read_already else ("read_file", {"path": "configkit/config.py"})
    call = {"id": f"call_{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    message = {"role": "assistant", "content": model.marker(number), "tool_calls": [call]}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


@contextmanager
def slow_model(delay: float) -> Iterator[SlowModel]:
    model = SlowModel(delay=delay)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            self._send({"data": [{"id": "slow"}]})

        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with model.lock:
                model.served += 1
                number = model.served
                model.in_flight.add(number)
            try:
                time.sleep(model.delay)
                self._send(_answer(number, body.get("messages", []), model))
            finally:
                with model.lock:
                    model.in_flight.discard(number)

        def _send(self, data: dict[str, object]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    model.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        server.shutdown()
        server.server_close()
