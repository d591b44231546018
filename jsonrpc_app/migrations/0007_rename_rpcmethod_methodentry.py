"""
The admin's method browser proxy model RpcMethod is now MethodEntry (a name
that does not read as a second kind of method). The proxy has no table; what
the rename must carry over is its view permission: the codename
``view_rpcmethod`` becomes ``view_methodentry`` on the same Permission row, so
users and groups that were granted it keep it.
"""

from django.db import migrations

OLD, NEW = "rpcmethod", "methodentry"


def _rename_permission(apps, schema_editor, old, new):
    try:
        Permission = apps.get_model("auth", "Permission")
        ContentType = apps.get_model("contenttypes", "ContentType")
    except LookupError:  # auth or contenttypes not installed: no grants to keep
        return
    db = schema_editor.connection.alias
    # RenameModel renames the content type (old model name -> new) as well,
    # but only after this runs in some orders: look under both names.
    types = ContentType.objects.using(db).filter(app_label="jsonrpc_app", model__in=[old, new])
    perms = Permission.objects.using(db).filter(content_type__in=types, codename="view_%s" % old)
    for perm in perms:
        if Permission.objects.using(db).filter(content_type=perm.content_type, codename="view_%s" % new).exists():
            continue
        perm.codename = "view_%s" % new
        perm.name = perm.name.replace(old, new) if old in perm.name else perm.name
        perm.save(update_fields=["codename", "name"])


def forwards(apps, schema_editor):
    _rename_permission(apps, schema_editor, OLD, NEW)


def backwards(apps, schema_editor):
    _rename_permission(apps, schema_editor, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [
        ("jsonrpc_app", "0006_envelope_uid_uuid7"),
    ]

    operations = [
        migrations.RenameModel("RpcMethod", "MethodEntry"),
        migrations.RunPython(forwards, backwards),
    ]
