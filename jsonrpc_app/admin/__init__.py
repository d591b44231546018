"""
The app's admin: the call log's changelists (``log``), the method browser
(``methods``) with its Try-it form (``tryit``), replay and the comparison of
answers (``replay``, mixed into the envelope admin), usage from the rollups
(``usage``) and its dashboard (``dashboard``, charts drawn by ``charts``);
``shared`` holds what the pages share. Registering them with ``admin.site``
happens here and only here.
"""

from django.contrib import admin

from ..models import Call, Envelope, MethodEntry, UsageRollup
from .dashboard import UsageDashboardAdmin
from .log import CallAdmin, EnvelopeAdmin
from .methods import MethodEntryAdmin

admin.site.register(Envelope, EnvelopeAdmin)
admin.site.register(Call, CallAdmin)
admin.site.register(MethodEntry, MethodEntryAdmin)
admin.site.register(UsageRollup, UsageDashboardAdmin)
