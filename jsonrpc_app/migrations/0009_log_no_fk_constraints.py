"""
The call log's two foreign keys (Call.envelope, Envelope.replay_of) lose
their database constraints; the fields, their indexes and what the ORM does
on delete (CASCADE, SET_NULL) stay.

Measured on 10,000,000 calls on PostgreSQL (docs/scale.md):
pruning the oldest 30 days (~293,000 envelopes, ~411,000 calls) took about
10 s with the constraints, about 4 s without: the constraints' triggers check
every deleted envelope, one query per row and constraint, for calls and
replays still pointing at it -- rows the prune itself has just deleted or
unlinked. Only jsonrpc_app.log writes these rows, an envelope and its calls
in one transaction, and only jsonrpc_prune and the admin delete them
(through the ORM, which deletes the calls and unlinks the replays itself).

jsonrpc_app/models.py must say ``db_constraint=False`` on both fields to
match this migration.

On SQLite this rebuilds both log tables (Django's way of dropping a
constraint there): on a large SQLite log, prune first.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jsonrpc_app", "0008_usage_rollups"),
    ]

    operations = [
        migrations.AlterField(
            model_name="call",
            name="envelope",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="calls",
                to="jsonrpc_app.envelope",
                verbose_name="envelope",
            ),
        ),
        migrations.AlterField(
            model_name="envelope",
            name="replay_of",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="replays",
                to="jsonrpc_app.envelope",
                verbose_name="replay of",
            ),
        ),
    ]
