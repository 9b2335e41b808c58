"""Training plugs its frozen sets into the lower layers' registries."""

from __future__ import annotations

import pytest

from annotation.pairs import TRAINING_SET, PairsError, resolve_source
from training.models import TrainingSet

pytestmark = pytest.mark.django_db


def test_make_pairs_can_name_a_training_set_by_name_or_version() -> None:
    TrainingSet.objects.create(name="curated", version=1, trajectory_ids=["a", "b"])
    TrainingSet.objects.create(name="curated", version=2, trajectory_ids=["c"])

    assert resolve_source(TRAINING_SET, "curated") == ["c"]  # the newest version
    assert resolve_source(TRAINING_SET, "curated@1") == ["a", "b"]
    with pytest.raises(PairsError, match="no training set named 'curated@3'"):
        resolve_source(TRAINING_SET, "curated@3")
    with pytest.raises(PairsError, match="version must be a number"):
        resolve_source(TRAINING_SET, "curated@latest")
    with pytest.raises(PairsError, match="no training set named 'other'"):
        resolve_source(TRAINING_SET, "other")
