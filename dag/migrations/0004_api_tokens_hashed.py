"""API tokens move from DRF's authtoken table (keys in clear) to django-rest-knox (keys hashed).

Each existing key keeps working, now stored only as its hash, with the configured lifetime from now;
the clear keys are deleted. A database that never had the authtoken table has nothing to move.
"""
from django.db import migrations
from django.utils import timezone

OLD_TABLE = "authtoken_token"


def hash_clear_tokens(apps, schema_editor):
    from knox.crypto import hash_token
    from knox.settings import CONSTANTS, knox_settings

    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return
    AuthToken = apps.get_model("knox", "AuthToken")
    ttl = knox_settings.TOKEN_TTL
    expiry = timezone.now() + ttl if ttl is not None else None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {schema_editor.quote_name('key')}, user_id FROM {OLD_TABLE}")
        rows = cursor.fetchall()
        AuthToken.objects.bulk_create([
            AuthToken(digest=hash_token(key), token_key=key[:CONSTANTS.TOKEN_KEY_LENGTH], user_id=user_id,
                      expiry=expiry) for key, user_id in rows])
        cursor.execute(f"DELETE FROM {OLD_TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("dag", "0003_launch_budget_and_node_refusal"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [migrations.RunPython(hash_clear_tokens, migrations.RunPython.noop)]
