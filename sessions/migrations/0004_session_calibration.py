from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("agent_sessions", "0003_usage_counter_and_calibration"),
    ]

    operations = [
        # Sessions calibrated before this field existed keep serving estimate + calibration_offset
        # (the additive fallback) until their next report starts the history.
        migrations.AddField(
            model_name="session",
            name="calibration",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
