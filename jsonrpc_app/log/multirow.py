"""
SQLite: the loader's call rows in a few multi-row INSERT statements rather
than one statement execution per row (``executemany``).

Measured with callgrind on the call table's schema (the loader's rows of a
batch of 100 ``subtract`` calls): 61,000 instructions a row with
``executemany``, 45,000 with multi-row statements, 28,600 with these. Per
row, ``executemany`` pays a statement's start and halt, and the driver
adapts every ``None`` and ``bool`` it binds the slow way (it looks for
``__adapt__`` and ``__conform__`` and formats the AttributeError of each,
CPython's ``pysqlite_microprotocols_adapt``). So a column that holds the
same ``None``, ``''``, ``False`` or ``True`` in every row of the chunk is
written into the statement as a literal (``NULL``, ``''``, ``0``, ``1``,
what the driver would have stored) and not bound at all: in the usual chunk
the error columns, the traceback, the user and the notification flag.

Statements take 64, 16, 4 or 1 rows, so that the driver's statement cache
(128 statements a connection) holds each text once prepared: a statement of
a size never seen before costs SQLite a parse of thousands of tokens.
"""

import sqlite3

SIZES = (64, 16, 4, 1)

_statements = {}


def _literal(value):
    """The SQL literal for ``value`` as the driver would bind it, or None for a value that is bound."""
    if value is None:
        return "NULL"
    if value is False:
        return "0"
    if value is True:
        return "1"
    if type(value) is str and not value:
        return "''"
    return None


def _constant(column, first):
    """Whether every value of ``column`` (a column of one type, or None) is ``first`` (None, a bool or '')."""
    # count() compares with ==: in a boolean column 0 counts as False, and is stored as it.
    return column.count(first) == len(column)


def insert(cursor, head, columns, max_params, returning=None):
    """
    Run ``head`` ("INSERT INTO table (columns)") for the rows whose adapted
    values ``columns`` holds, one sequence per column in ``head``'s order,
    on ``cursor`` (the driver's own: "?" placeholders), within
    ``max_params`` bound values per statement. With ``returning`` (SQL
    columns), return the rows of each statement's RETURNING clause, in no
    promised order (SQLite does not promise one).
    """
    returned = []
    count = len(columns[0]) if columns else 0
    if not count:
        return returned
    tail = " RETURNING %s" % returning if returning else ""
    marks, bound = [], []
    for column in columns:
        literal = _literal(column[0])
        if literal is not None and _constant(column, column[0]):
            marks.append(literal)
        else:
            marks.append("?")
            bound.append(column)
    row = "(%s)" % ", ".join(marks)
    width = len(bound)
    most = max(1, max_params // max(1, width))
    start = 0
    for size in SIZES:
        if size > most:
            continue
        sql = _statement(head, row, size, tail)
        params = [None] * (size * width)
        while count - start >= size:
            # Row-major values from the columns, one slice assignment a column (in C).
            for i, column in enumerate(bound):
                params[i::width] = column[start:start + size]
            cursor.execute(sql, params)
            if tail:
                returned.extend(cursor.fetchall())
            start += size
    return returned


def max_params(raw):
    """How many values a statement may bind on ``raw`` (a sqlite3 connection)."""
    try:
        return raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    except AttributeError:  # Python < 3.11
        return 999


def _statement(head, row, size, tail=""):
    key = (head, row, size, tail)
    sql = _statements.get(key)
    if sql is None:
        if len(_statements) > 256:
            _statements.clear()
        sql = _statements[key] = "%s VALUES %s%s" % (head, ", ".join([row] * size), tail)
    return sql
