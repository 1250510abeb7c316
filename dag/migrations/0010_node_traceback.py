from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dag', '0009_node_running_per_session'),
    ]

    operations = [
        migrations.AddField(
            model_name='node',
            name='traceback',
            field=models.TextField(blank=True),
        ),
    ]
