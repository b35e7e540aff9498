from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0012_session_side_calls_and_one_off"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="turn_state",
            field=models.JSONField(blank=True, editable=False, null=True),
        ),
    ]
