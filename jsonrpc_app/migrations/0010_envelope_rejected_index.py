"""
A partial index on the envelopes rejected as a whole (``error_code`` set: a
parse error, an invalid request, one body in thousands), for the envelope
list's "rejected as a whole" outcome and error code filters.

Measured on 10,000,000 calls on PostgreSQL (docs/scale.md):
without it, the list's exact count of those few rows read the whole envelope
table (``?error_code=-32603`` 1.1 s, ``?outcome=invalid`` 0.46 s). An OK
envelope does not enter the index, so the log's writers do not pay for it.
MySQL/MariaDB create no partial index (Django leaves it out there).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jsonrpc_app", "0009_log_no_fk_constraints"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="envelope",
            index=models.Index(
                condition=models.Q(("error_code__isnull", False)),
                fields=["error_code", "created_at"],
                name="jsonrpc_env_rejected",
            ),
        ),
    ]
