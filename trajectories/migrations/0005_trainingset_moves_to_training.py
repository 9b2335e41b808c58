"""TrainingSet moves to the training app (a layer above trajectories).

State only, except the table's rename: its rows stay where they are. training.0001_initial
takes the model over in the migration state (it depends on this one).
"""

from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("trajectories", "0004_trajectory_replay_report"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.AlterModelTable(name="TrainingSet", table="training_trainingset")],
            state_operations=[migrations.DeleteModel(name="TrainingSet")],
        ),
    ]
