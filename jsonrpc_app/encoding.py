"""
How values that JSON cannot hold natively are written: the way Django's
``DjangoJSONEncoder`` writes them (datetime, date, time, timedelta, Decimal,
UUID, lazy translation strings), used by responses and the call log alike.
"""

from django.core.serializers.json import DjangoJSONEncoder

_encoder = DjangoJSONEncoder()


def json_default(value):
    """Return a JSON-native stand-in for ``value`` or raise TypeError."""
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return _encoder.default(value)
