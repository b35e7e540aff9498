"""ReviewStatus "not_applicable": jobs that ended without a summary (skipped, failed) are not
waiting for a review. Existing ones leave the Pending queue."""

from django.db import migrations, models


def forwards(apps, schema_editor):
    Compaction = apps.get_model("compaction", "Compaction")
    Compaction.objects.filter(status__in=["skipped", "failed"], review_status="pending").update(
        review_status="not_applicable"
    )


def backwards(apps, schema_editor):
    Compaction = apps.get_model("compaction", "Compaction")
    Compaction.objects.filter(review_status="not_applicable").update(review_status="pending")


class Migration(migrations.Migration):
    dependencies = [
        ("compaction", "0002_compaction_enqueued_at"),
    ]

    operations = [
        migrations.AlterField(
            model_name="compaction",
            name="review_status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("approved", "Approved"),
                    ("rejected", "Rejected"),
                    ("needs_changes", "Needs changes"),
                    ("not_applicable", "No summary to review"),
                ],
                db_index=True,
                default="pending",
                max_length=16,
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
