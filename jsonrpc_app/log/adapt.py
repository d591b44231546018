"""
Column values as the ORM would hand them to the database, worked out per
field once (``_adapters()``) and applied column by column: the ORM's insert
compiler does this for every value of every row, which is most of the cost
of logging a batch. Used by jsonrpc_app.log.sql's statements and by the
loader (jsonrpc_app.log.loader).
"""

import datetime
import json
import operator
import weakref

import orjson
from django.db import models

from ..models import Call, Envelope

# The columns every INSERT of the log writes: all but the primary key.
ENVELOPE_FIELDS = _ENVELOPE_FIELDS = [f for f in Envelope._meta.concrete_fields if not f.primary_key]
CALL_FIELDS = [f for f in Call._meta.concrete_fields if not f.primary_key]

# How a value of each column reaches the database, worked out per field once:
# the ORM's insert compiler does this for every value of every row, which is
# most of the cost of logging a batch.
_PLAIN_TYPES = {
    models.CharField: (str,),
    models.TextField: (str,),
    models.IntegerField: (int,),
    models.PositiveIntegerField: (int,),
    models.PositiveSmallIntegerField: (int,),
    models.BigIntegerField: (int,),
    models.FloatField: (float, int),
    models.BooleanField: (bool,),
    models.ForeignKey: (int,),
}


_adapter_cache = weakref.WeakKeyDictionary()


def per_connection(conn):
    """The dict of what is worked out once for ``conn`` (adapters, statements), dropped with it."""
    per_conn = _adapter_cache.get(conn)
    if per_conn is None:
        per_conn = _adapter_cache[conn] = {}
    return per_conn


def _adapters(conn, fields):
    """Return the adapters of ``fields`` (a module-level list) on ``conn``, built once per connection."""
    per_conn = per_connection(conn)
    adapters = per_conn.get(id(fields))
    if adapters is None:
        adapters = per_conn[id(fields)] = _build_adapters(conn, fields)
    return adapters


def _build_adapters(conn, fields):
    ops = conn.ops
    adapters = []
    for field in fields:
        plain = _PLAIN_TYPES.get(type(field), ())
        # The types a column takes as they are, None included, as a set (see _columns).
        plain = frozenset(plain + (type(None),)) if plain else frozenset()
        if isinstance(field, models.JSONField):
            encoder = field.encoder
            if conn.vendor == "sqlite" and encoder is None:
                adapters.append((field.attname, frozenset(), _sqlite_json))
            else:
                adapters.append((field.attname, (), lambda v, e=encoder: ops.adapt_json_value(v, e)))
        elif type(field) is models.DateTimeField:
            adapters.append((field.attname, (), ops.adapt_datetimefield_value))
        else:
            adapters.append(
                (field.attname, plain, lambda v, f=field: f.get_db_prep_save(v, conn))
            )
    return adapters


def _sqlite_json(value):
    """
    The JSON text of ``value`` for a JSONField column on SQLite: orjson's
    compact text where it writes the value (the same value when read back,
    in a fraction of json.dumps's time), else what the ORM would write
    (SQLite's adapt_json_value is json.dumps whatever the connection).
    """
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def insert_head(conn, model, fields):
    """Return "INSERT INTO table (columns)" for ``fields`` (a module-level list) on ``conn``, built once."""
    per_conn = per_connection(conn)
    key = ("head", id(fields))
    head = per_conn.get(key)
    if head is None:
        quote = conn.ops.quote_name
        head = per_conn[key] = "INSERT INTO %s (%s)" % (
            quote(model._meta.db_table),
            ", ".join(quote(f.column) for f in fields),
        )
    return head


def envelope_params(conn, env):
    """The envelope's values for _ENVELOPE_FIELDS, adapted; None if one is an expression."""
    params = []
    values = env.__dict__
    for attname, plain, adapt in _adapters(conn, _ENVELOPE_FIELDS):
        value = values[attname]
        if value is None or type(value) in plain:
            params.append(value)
        elif hasattr(value, "resolve_expression"):
            return None
        else:
            params.append(adapt(value))
    return params


def adapted_columns(conn, fields, objs):
    """
    Return the values of ``objs`` for ``fields``, column by column, each
    adapted as the ORM would, or None if a value is an expression (which
    only the ORM's compiler can write).

    Column by column rather than value by value: a column of a type the
    database takes as it is (text, numbers, booleans) is checked with one
    set of the types it holds, and a value shared by every call of an
    envelope (its time) is adapted once.
    """
    adapters = _adapters(conn, fields)
    getter = _getters.get(id(fields))
    if getter is None:
        getter = _getters[id(fields)] = operator.itemgetter(*(a[0] for a in adapters))
    if len(adapters) == 1:
        rows = [(getter(o.__dict__),) for o in objs]
    else:
        rows = [getter(o.__dict__) for o in objs]
    return _adapt(adapters, zip(*rows))


def adapt_columns(conn, fields, columns, typed=frozenset()):
    """
    adapted_columns() for values given column by column already (one
    sequence for each of ``fields``, in order): the loader's split lines
    (jsonrpc_app.log.split.SplitCalls) are read into columns, no Call built.
    ``typed``: the attnames whose values are known to be of their column's
    plain types (for a JSON column: read from JSON), whose types are then
    not looked at.
    """
    return _adapt(_adapters(conn, fields), columns, typed)


def _adapt(adapters, columns, typed=frozenset()):
    out = []
    for (attname, plain, adapt), column in zip(adapters, columns):
        known = attname in typed
        first = column[0] if column else None
        if not known and type(first) in _SHARED_TYPES and len(column) > 1 and column.count(first) == len(column):
            # One value for every row (an envelope's time, user, source): adapted once.
            one = _adapt_column(plain, adapt, column[:1], False)
            if one is None:
                return None
            out.append(one * len(column))
            continue
        values = _adapt_column(plain, adapt, column, known)
        if values is None:
            return None
        out.append(values)
    return out


def _adapt_column(plain, adapt, column, known):
    if plain and (known or set(map(type, column)) <= plain):
        return column
    if adapt is _sqlite_json:
        if column and type(column[0]) is int and set(map(type, column)) == _INT:
            # A column of ids or results that are integers: their JSON is str(),
            # without orjson's bytes and their decoding (int beyond 64 bits included,
            # which orjson refuses and json.dumps writes so).
            try:
                return list(map(int.__repr__, column))
            except ValueError:
                pass  # beyond the digits str() allows: one by one, as the ORM would
        elif known or set(map(type, column)) <= _JSON_OR_NONE:
            try:
                return [None if v is None else _dumps(v).decode() for v in column]
            except TypeError:
                pass  # a value orjson cannot write: one by one, as the ORM would
    values = []
    last_in = last_out = None
    for value in column:
        t = type(value)
        if value is None or t in plain:
            values.append(value)
        elif value is last_in:
            values.append(last_out)
        elif t not in _JSON_TYPES and hasattr(value, "resolve_expression"):
            return None
        else:
            last_in, last_out = value, adapt(value)
            values.append(last_out)
    return values


# The types of a value that equal ones adapt alike (count() compares with ==).
_SHARED_TYPES = frozenset({str, int, type(None), datetime.datetime})
_getters = {}
_JSON_TYPES = frozenset({dict, list, str, int, float, bool})
_JSON_OR_NONE = _JSON_TYPES | {type(None)}
_INT = {int}
_dumps = orjson.dumps
