"""Many WebSocket viewers of one live batch: does every viewer get every event, and how late?

Viewers behave like the batch page: subscribe to the batch's group and read. Besides the
batch's own events (steps, trajectory ends), the driver publishes a probe event carrying its
send time every PROBE_S through the same channel layer, which gives the publish-to-viewer
latency under the batch's load. A viewer never reconnects: a dropped socket is a loss.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from scripts.reliability.stack import Stack, percentile

PROBE_S = 1.0  # one probe a second: enough samples, and not itself most of the traffic


class Viewer:
    def __init__(self, url: str, cookie: str, group: str) -> None:
        self.url, self.cookie, self.group = url, cookie, group
        self.origin = "http://" + url.split("//", 1)[1].split("/", 1)[0]
        self.events: set[str] = set()
        self.latencies_ms: list[float] = []
        self.error = ""

    async def run(self, ready: asyncio.Queue[bool], stop: asyncio.Event) -> None:
        import websockets

        subscribed = False
        try:
            async with websockets.connect(
                self.url,
                origin=self.origin,  # type: ignore[arg-type]
                additional_headers={"Cookie": self.cookie},
                ping_interval=None,
                open_timeout=60,
                max_queue=None,
            ) as ws:
                await ws.send(json.dumps({"action": "subscribe", "group": self.group}))
                while not stop.is_set():
                    try:
                        raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
                    except TimeoutError:
                        continue
                    now = time.time()
                    message = json.loads(raw)
                    if message.get("type") == "subscribed":
                        subscribed = True
                        await ready.put(True)
                    elif message.get("type") == "event":
                        event = message["event"]
                        if event.get("kind") == "probe":
                            self.latencies_ms.append((now - event["sent"]) * 1000)
                        self.events.add(json.dumps(event, sort_keys=True))
        except Exception as exc:  # noqa: BLE001 - every way a socket can drop counts the same
            self.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            if not subscribed:
                await ready.put(False)


async def _watch(viewers: list[Viewer], on_ready: Any, batch_done: Any, on_done: Any) -> None:
    stop = asyncio.Event()
    ready: asyncio.Queue[bool] = asyncio.Queue()
    tasks = [asyncio.create_task(v.run(ready, stop)) for v in viewers]
    for _ in viewers:
        await ready.get()
    await asyncio.to_thread(on_ready)
    while not await asyncio.to_thread(batch_done):
        await asyncio.sleep(1.0)
    on_done()  # no probe after this, so none is cut off by the end of the run
    await asyncio.sleep(3.0)  # the last events on their way
    stop.set()
    await asyncio.gather(*tasks)


def run(stack: Stack, viewers_count: int, samples: int) -> dict[str, Any]:
    from core.live import publish
    from trajectories.batches import enqueue_missing
    from trajectories.events import batch_live_group
    from trajectories.models import RolloutBatch

    batch = stack.scripted_batch(samples, enqueue=False)
    group = batch_live_group(batch.pk)
    viewers = [Viewer(stack.ws_url, stack.cookie, group) for _ in range(viewers_count)]
    probes = 0
    probing = threading.Event()
    started = 0.0

    def probe() -> None:
        nonlocal probes
        while probing.is_set():
            probes += 1
            publish(group, {"kind": "probe", "n": probes, "sent": time.time()})
            time.sleep(PROBE_S)

    prober = threading.Thread(target=probe, daemon=True)

    def on_ready() -> None:
        nonlocal started
        started = time.monotonic()
        probing.set()
        prober.start()
        enqueue_missing(RolloutBatch.objects.get(pk=batch.pk))

    def stop_probing() -> None:
        probing.clear()
        prober.join(5)

    def batch_done() -> bool:
        return RolloutBatch.objects.get(pk=batch.pk).status in ("succeeded", "failed", "cancelled")

    try:
        asyncio.run(_watch(viewers, on_ready, batch_done, stop_probing))
    finally:
        probing.clear()
        prober.join(5)
    wall = time.monotonic() - started
    seen = set().union(*(v.events for v in viewers))
    connected = [v for v in viewers if not v.error]
    latencies = [ms for v in viewers for ms in v.latencies_ms]
    batch.refresh_from_db()
    return {
        "viewers": viewers_count,
        "viewers_dropped": viewers_count - len(connected),
        "batch_status": batch.status,
        "trajectories": batch.trajectories.count(),
        "events": len(seen),
        "probes": probes,
        "deliveries_expected": len(seen) * viewers_count,
        "deliveries": sum(len(v.events) for v in viewers),
        "dropped": sum(len(seen - v.events) for v in viewers),
        "latency_p50_ms": percentile(latencies, 0.5),
        "latency_p95_ms": percentile(latencies, 0.95),
        "latency_max_ms": percentile(latencies, 1.0),
        "wall_s": round(wall, 1),
        "errors": sorted({v.error for v in viewers if v.error})[:5],
    }
