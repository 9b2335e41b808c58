"""`{% queue_wait_for "training" as wait %}`: why a row queued there waits (core.queue_waits)."""

from __future__ import annotations

from django import template

from core.queue_waits import QueueWait, queue_wait
from core.vocabulary import JobQueue

register = template.Library()


@register.simple_tag
def queue_wait_for(queue: str) -> QueueWait:
    # JobQueue(queue) refuses a misspelt name loudly instead of reporting an empty queue.
    return queue_wait(JobQueue(queue))
