# A handoff may end "ignored" (issue 26 §4): its holder dismissed the request (Agent Inbox's
# "ignore"). Only the field's choices change; no column does.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("handoffs_app", "0004_handoff_digest"),
    ]

    operations = [
        migrations.AlterField(
            model_name="handoff",
            name="status",
            field=models.CharField(
                choices=[
                    ("open", "Open"),
                    ("claimed", "Claimed"),
                    ("answered", "Answered"),
                    ("taken_over", "Taken over"),
                    ("handed_back", "Handed back"),
                    ("closed", "Closed"),
                    ("cancelled", "Cancelled"),
                    ("expired", "Expired"),
                    ("ignored", "Ignored"),
                ],
                default="open",
                max_length=16,
            ),
        ),
    ]
