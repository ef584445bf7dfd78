# The digest of waiting handoffs per project (issue 26 §4): where it goes, how often, and what
# each channel was last sent.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("handoffs_app", "0003_handoff_viewer"),
    ]

    operations = [
        migrations.AddField(
            model_name="handoffsettings",
            name="digest_emails",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="handoffsettings",
            name="digest_chat_url",
            field=models.CharField(blank=True, default="", max_length=2000),
        ),
        migrations.AddField(
            model_name="handoffsettings",
            name="digest_interval_seconds",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="handoffsettings",
            name="digest_due_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="handoffsettings",
            name="digest_email_sent_state",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="handoffsettings",
            name="digest_chat_sent_state",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="handoffsettings",
            name="digest_sent_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="handoffsettings",
            name="digest_last_error",
            field=models.CharField(blank=True, default="", max_length=500),
        ),
        migrations.AddIndex(
            model_name="handoffsettings",
            index=models.Index(
                condition=models.Q(("digest_interval_seconds__gt", 0)),
                fields=["digest_due_at"],
                name="handoff_digest_due",
            ),
        ),
    ]
