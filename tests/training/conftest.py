from __future__ import annotations

from tests.training.runs import fake_trainer

__all__ = ["fake_trainer"]
