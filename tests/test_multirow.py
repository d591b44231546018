"""
The loader's SQLite INSERTs (jsonrpc_app.log.multirow): many rows a statement,
a column the same None, '', False or True in every row written as a literal.
Whatever the statements, the table must hold what one INSERT per row
(executemany) would have stored, in the same order.
"""

import sqlite3

import pytest

from jsonrpc_app.log import multirow

COLUMNS = ("n", "absent", "empty", "flag", "text", "maybe", "number")


def _table():
    db = sqlite3.connect(":memory:")
    for name in ("by_row", "by_statement"):
        db.execute("CREATE TABLE %s (id INTEGER PRIMARY KEY AUTOINCREMENT, %s)" % (name, ", ".join(COLUMNS)))
    return db


def _rows(count, vary=False):
    rows = []
    for i in range(count):
        rows.append((
            i,
            None,
            "",
            (i % 3 == 0) if vary else False,
            "call %d" % i,
            (None if i % 2 else "x") if vary else None,
            i * 0.5,
        ))
    return rows


def _load(db, rows, max_params=999):
    head = "INSERT INTO by_row (%s)" % ", ".join(COLUMNS)
    db.executemany("%s VALUES (%s)" % (head, ", ".join("?" * len(COLUMNS))), rows)
    columns = [list(c) for c in zip(*rows)] if rows else []
    multirow.insert(db.cursor(), head.replace("by_row", "by_statement"), columns, max_params)
    fetch = "SELECT id, %s, typeof(flag), typeof(absent), typeof(empty) FROM %%s ORDER BY id" % ", ".join(COLUMNS)
    return db.execute(fetch % "by_row").fetchall(), db.execute(fetch % "by_statement").fetchall()


@pytest.mark.parametrize("count", [0, 1, 3, 4, 5, 17, 64, 85, 100, 257])
def test_rows_stored_as_one_insert_per_row_would_store_them(count):
    by_row, by_statement = _load(_table(), _rows(count))
    assert len(by_statement) == count
    assert by_statement == by_row


@pytest.mark.parametrize("count", [1, 2, 65, 130])
def test_columns_that_vary_are_bound_whatever_their_first_value(count):
    by_row, by_statement = _load(_table(), _rows(count, vary=True))
    assert by_statement == by_row


def test_a_boolean_column_of_false_and_zero_is_one_constant_stored_as_integer_zero():
    rows = [(1, None, "", False, "a", None, 1.0), (2, None, "", 0, "b", None, 2.0)]
    by_row, by_statement = _load(_table(), rows)
    assert by_statement == by_row
    assert [r[4] for r in by_statement] == [0, 0] and by_statement[0][-3] == "integer"


def test_a_parameter_limit_below_a_rows_width_still_writes_every_row():
    rows = _rows(70, vary=True)
    by_row, by_statement = _load(_table(), rows, max_params=3)
    assert by_statement == by_row


def test_statements_take_only_the_fixed_sizes():
    db = _table()
    seen = []
    db.set_trace_callback(seen.append)
    _load(db, _rows(85), max_params=999)
    inserts = [s for s in seen if s.startswith("INSERT INTO by_statement")]
    # 85 = 64 + 16 + 4 + 1: four statements, each of a size the driver's cache keeps.
    assert [s.count("), (") + 1 for s in inserts] == [64, 16, 4, 1]
    # The constant columns are literals: NULL, '' and 0 in every row.
    head = "INSERT INTO by_statement (n, absent, empty, flag, text, maybe, number) VALUES "
    assert inserts[-1].startswith(head + "(84, NULL, '', 0,")
