"""Celery app: one broker (Redis), the queues of core.vocabulary.JobQueue, jobs found in each app's `jobs.py`."""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

from core.vocabulary import JobQueue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("crucible")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in JobQueue]
app.autodiscover_tasks(related_name="jobs")
