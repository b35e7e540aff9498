from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0013_message_cut_off_reply_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="turn_state",
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
    ]
