"""TrainingSet, taken over from trajectories with its rows (see trajectories.0005).

The table already exists (trajectories.0005 renamed it), so creating the model is state only.
Its content type moves too, so permissions and admin history keep pointing at it.
"""

from __future__ import annotations

import django.db.models.deletion
from django.apps.registry import Apps
from django.conf import settings
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def _move_content_type(apps: Apps, from_app: str, to_app: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    # A fresh database has no content types yet (post_migrate creates them); one that already
    # has the target row (it was created after an earlier move) keeps it.
    if not content_type.objects.filter(app_label=to_app, model="trainingset").exists():
        content_type.objects.filter(app_label=from_app, model="trainingset").update(app_label=to_app)


def content_type_to_training(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _move_content_type(apps, "trajectories", "training")


def content_type_to_trajectories(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    _move_content_type(apps, "training", "trajectories")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("trajectories", "0005_trainingset_moves_to_training"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TrainingSet",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("name", models.SlugField(max_length=100)),
                        ("version", models.PositiveIntegerField()),
                        ("rule", models.JSONField(default=dict)),
                        ("trajectory_ids", models.JSONField(default=list)),
                        ("stats", models.JSONField(default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("created_by", models.ForeignKey(blank=True, null=True,
                                                         on_delete=django.db.models.deletion.SET_NULL,
                                                         to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "ordering": ["name", "-version"],
                        "constraints": [models.UniqueConstraint(fields=("name", "version"),
                                                                name="training_set_version")],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_type_to_training, content_type_to_trajectories),
    ]
