# Who else is viewing a handoff's workspace (issue 26 §4): one row per open page.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("handoffs_app", "0002_handoff_settings_verbose_names"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="HandoffViewer",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("channel_name", models.CharField(max_length=200, unique=True)),
                ("seen_at", models.DateTimeField()),
                (
                    "handoff",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="handoffs_app.handoff",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["handoff", "seen_at"], name="handoff_viewer_seen"),
                    models.Index(fields=["seen_at"], name="handoff_viewer_stale"),
                ],
            },
        ),
    ]
