from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dag', '0011_replay_and_fork'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='share_generation',
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
    ]
