"""Signals for the apps above trajectories: they react to rollouts without being imported by them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside the transaction that stores a rollout's end (not for cancelled ones), with
# `trajectory`: receivers that start work register it with transaction.on_commit, so
# nothing runs against a row that might still roll back.
trajectory_finished = Signal()
