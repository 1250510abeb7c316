from django.db import migrations, models


class Migration(migrations.Migration):
    """Run leases: which process runs a session, and when it last said it is alive."""

    dependencies = [
        ('dag', '0005_session_cancel_requested_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='worker',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
        migrations.AddField(
            model_name='session',
            name='heartbeat_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='last heartbeat'),
        ),
    ]
