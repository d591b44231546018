"""
Usage rollups (jsonrpc_app.models.UsageRollup, maintained by jsonrpc_app.log.rollup).
An existing log is rolled up by `manage.py jsonrpc_rollup --rebuild` (docs/admin.md, "Usage rollups").
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jsonrpc_app', '0007_rename_rpcmethod_methodentry'),
    ]

    operations = [
        migrations.CreateModel(
            name='UsageRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('width', models.PositiveIntegerField(choices=[(60, 'minute'), (3600, 'hour'), (0, 'all time')], verbose_name='width (seconds)')),
                ('start', models.DateTimeField(verbose_name='start')),
                ('method', models.CharField(blank=True, max_length=255, verbose_name='method')),
                ('source', models.CharField(choices=[('http', 'HTTP'), ('admin', 'Admin try-it'), ('replay', 'Replay'), ('cli', 'Command line')], default='http', max_length=16, verbose_name='source')),
                ('is_error', models.BooleanField(default=False, verbose_name='error')),
                ('error_code', models.IntegerField(default=0, verbose_name='error code')),
                ('calls', models.BigIntegerField(default=0, verbose_name='calls')),
                ('notifications', models.BigIntegerField(default=0, verbose_name='notifications')),
                ('duration_sum', models.FloatField(default=0.0, verbose_name='duration sum (ms)')),
                ('duration_min', models.FloatField(default=0.0, verbose_name='shortest (ms)')),
                ('duration_max', models.FloatField(default=0.0, verbose_name='longest (ms)')),
                ('h00', models.BigIntegerField(default=0)),
                ('h01', models.BigIntegerField(default=0)),
                ('h02', models.BigIntegerField(default=0)),
                ('h03', models.BigIntegerField(default=0)),
                ('h04', models.BigIntegerField(default=0)),
                ('h05', models.BigIntegerField(default=0)),
                ('h06', models.BigIntegerField(default=0)),
                ('h07', models.BigIntegerField(default=0)),
                ('h08', models.BigIntegerField(default=0)),
                ('h09', models.BigIntegerField(default=0)),
                ('h10', models.BigIntegerField(default=0)),
                ('h11', models.BigIntegerField(default=0)),
                ('h12', models.BigIntegerField(default=0)),
                ('h13', models.BigIntegerField(default=0)),
                ('h14', models.BigIntegerField(default=0)),
                ('h15', models.BigIntegerField(default=0)),
                ('h16', models.BigIntegerField(default=0)),
            ],
            options={
                'verbose_name': 'usage',
                'verbose_name_plural': 'usage',
                'indexes': [models.Index(fields=['method', 'width', 'start'], name='jsonrpc_usage_method')],
                'constraints': [models.UniqueConstraint(fields=('width', 'start', 'method', 'source', 'is_error', 'error_code'), name='jsonrpc_usage_key')],
            },
        ),
    ]
