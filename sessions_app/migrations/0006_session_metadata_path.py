from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY: a deployment's sessions table stays writable while it builds.
    atomic = False

    dependencies = [
        ("sessions_app", "0005_session_retention_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="session",
            index=GinIndex(
                fields=["metadata"], name="session_metadata_path", opclasses=["jsonb_path_ops"]
            ),
        ),
    ]
