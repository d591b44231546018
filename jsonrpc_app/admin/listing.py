"""
What keeps the call log's changelists from reading whole tables on a log of
millions of rows:

- ``EstimatedCountPaginator``: on PostgreSQL, the count of a large list is
  the planner's estimate (``pg_class.reltuples`` for the unfiltered table,
  the EXPLAIN row estimate for a filtered list) instead of a ``COUNT(*)``
  that reads every row, and so is a smaller list whose count the planner
  costs high (rows fetched to be joined, not an index read alone); small
  lists, and every list elsewhere, are counted. A search of a large table
  reads its page and one row more ("more than N"). A page nearer the end
  than the start is read from the end, in the reverse order, so the last
  page is a small OFFSET;
- ``calendar_hierarchy`` (via ``LogChangeList``): the date drill-down
  offers the years, months and days between the list's first and last row
  (on PostgreSQL ORDER BY ... LIMIT 1 each way: two index walks that stop
  at the first row; MIN and MAX elsewhere) rather than the distinct dates
  of every row, which Django's own hierarchy reads;
- the filters' choices (``method_choices``, ``error_code_choices``) come from
  the registry and the usage rollups, never from ``SELECT DISTINCT`` over Call.
"""

import calendar
import datetime
import json

from django.contrib.admin.utils import get_fields_from_path
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import EmptyResultSet
from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django.db import connections
from django.db.models import Max, Min, QuerySet, Subquery
from django.utils import formats, timezone
from django.utils.functional import cached_property
from django.utils.text import capfirst

from ..conf import jsonrpc_settings
from ..log.rollup import EPOCH
from ..models import UsageRollup, Width

# A list whose estimated size is at least this many rows is not counted.
ESTIMATE_FROM = 100_000
# Nor a smaller one whose COUNT(*) the planner costs at this or more (its cost
# units): on 10M calls, the counts an index answers alone cost under 2,000
# (the 51,000 calls of a user: 30 ms), those that fetch rows to join them cost
# 200,000 and more (the 50,000 envelopes holding a rare method's calls: 1.4 s).
COUNT_COST_FROM = 50_000
# The cost is asked for (one more EXPLAIN) only from this estimated size on:
# a few thousand rows are counted fast whatever the plan.
COST_CHECK_FROM = 10_000


class EstimatedCountPaginator(Paginator):
    """
    A Paginator whose ``count`` of a large PostgreSQL list is an estimate
    (``estimated`` says so), or for a search a lower bound (``at_least``).

    A search (``searching``, the admin's ``?q=``) matches text inside rows:
    no index serves it and the planner's estimate of it is a guess, so its
    exact count reads the whole table (5 s on ten million calls). On a large
    table (PostgreSQL's estimate; elsewhere the highest id) a search reads
    only the page asked for (``page_hint``) and one row more: the rows, and
    whether there is a next page.
    """

    estimated = False
    at_least = None

    def __init__(self, *args, searching=False, page_hint=1, **kwargs):
        super().__init__(*args, **kwargs)
        self.searching = searching
        self.page_hint = page_hint

    @cached_property
    def count(self):
        queryset = self.object_list
        if self.searching:
            size = table_size(queryset, highest_id=True)
            if size is not None and size >= ESTIMATE_FROM:
                return self._count_up_to_next_page(queryset)
        estimate = estimated_count(queryset)
        if estimate is not None and (
            estimate >= ESTIMATE_FROM
            or (estimate >= COST_CHECK_FROM and count_cost(queryset) >= COUNT_COST_FROM)
        ):
            self.estimated = True
            return estimate
        return queryset.count()

    def _count_up_to_next_page(self, queryset):
        """
        Read the page asked for and one row more, in the list's order (the
        index walk stops there): the count is the rows up to it, more than
        ``at_least`` when that row exists; the page is served from them.
        """
        number = max(1, self.page_hint)
        bottom, shown = (number - 1) * self.per_page, number * self.per_page
        rows = list(queryset[bottom : shown + 1])
        self._search_page = (number, rows[: self.per_page])
        if not rows:
            # Past the end, or an empty list: counted (at most ``bottom`` rows).
            return queryset[:bottom].count() if bottom else 0
        if len(rows) > self.per_page:
            self.at_least = shown
            return shown + 1
        return bottom + len(rows)

    def validate_number(self, number):
        """
        Any page from 1 on while the count is an estimate: the list may hold
        more rows than the planner thinks, and a page past the estimate's end
        is a page of rows, or an empty one, never an error (a redirect to ?e=1).
        """
        if self.count and (self.estimated or self.at_least):
            return self._page_number(number)
        return super().validate_number(number)

    def _page_number(self, number):
        try:
            number = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger(self.error_messages["invalid_page"]) from None
        if number < 1:
            raise EmptyPage(self.error_messages["min_page"])
        return number

    def page(self, number):
        """
        The page's rows; a page nearer the list's end than its start is read
        from the end, in the reverse order (the same index, read the other
        way) with a small OFFSET, and put back in the list's order: the last
        page of ten million rows reads 50 index entries, not ten million.

        Counted exactly, every page holds the same rows either way. While the
        count is an estimate, the pages past the middle count from the end:
        the last page is the oldest rows (a full page), and a page past the
        last is empty; when the estimate is off, the pages around the middle
        may repeat or skip some rows (the filters and the date hierarchy
        reach every row).
        """
        number = self.validate_number(number)
        searched = getattr(self, "_search_page", None)
        if searched is not None and searched[0] == number:
            return self._get_page(searched[1], number, self)
        bottom = (number - 1) * self.per_page
        if self.estimated:
            if number > self.num_pages:
                return self._get_page([], number, self)
            top = min(bottom + self.per_page, self.count)
            size = self.per_page
        else:
            top = bottom + self.per_page
            if top + self.orphans >= self.count:
                top = self.count
            size = top - bottom
        from_end = max(0, self.count - top)
        if from_end < bottom and not self.at_least and self._reversible():
            rows = list(self.object_list.reverse()[from_end : from_end + size])
            rows.reverse()
            return self._get_page(rows, number, self)
        return self._get_page(self.object_list[bottom : bottom + size], number, self)

    def _reversible(self):
        """Whether the list is a queryset in a total order (the changelist's: the time, then the id)."""
        queryset = self.object_list
        return isinstance(queryset, QuerySet) and queryset.ordered and not queryset.query.distinct


def table_size(queryset, highest_id=False):
    """
    The planner's estimate of the rows of ``queryset``'s whole table on
    PostgreSQL; None elsewhere or unknown. With ``highest_id``, elsewhere the
    span of the ids, highest less lowest (the rows there can be, at most: one
    lookup at each end of the primary key; not the highest id alone, which a
    pruned log, or MySQL's AUTO_INCREMENT after rolled-back inserts, keeps high
    over few rows).
    """
    conn = connections[queryset.db]
    if conn.vendor != "postgresql":
        if not highest_id:
            return None
        ends = queryset.model._default_manager.db_manager(queryset.db).aggregate(top=Max("pk"), bottom=Min("pk"))
        return None if ends["top"] is None else ends["top"] - ends["bottom"] + 1
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
            [conn.ops.quote_name(queryset.model._meta.db_table)],
        )
        row = cursor.fetchone()
    # -1: never vacuumed nor analyzed (PostgreSQL 14+); 0 may be an empty table.
    return int(row[0]) if row is not None and row[0] > 0 else None


def count_cost(queryset):
    """The planner's cost of ``SELECT COUNT(*)`` of ``queryset`` (PostgreSQL only); 0 for an unfiltered table."""
    if not queryset.query.where:
        return 0
    conn = connections[queryset.db]
    try:
        sql, params = queryset.order_by().values("pk").query.sql_with_params()
    except EmptyResultSet:
        return 0
    with conn.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) SELECT COUNT(*) FROM (%s) jsonrpc_counted" % sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return float(plan[0]["Plan"]["Total Cost"])


def estimated_count(queryset):
    """The planner's estimate of the rows of ``queryset`` on PostgreSQL; None elsewhere or when unknown."""
    conn = connections[queryset.db]
    if conn.vendor != "postgresql":
        return None
    if not queryset.query.where:
        return table_size(queryset)
    with conn.cursor() as cursor:
        try:
            sql, params = queryset.order_by().values("pk").query.sql_with_params()
        except EmptyResultSet:
            return 0  # a filter that matches nothing (queryset.none())
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


class LogChangeList(ChangeList):
    """
    The log's ChangeList: its date hierarchy from the calendar (see
    calendar_hierarchy()), and the time order with the id in the same
    direction, so that the (created_at, id) index serves it either way
    (Django appends "-pk" whatever the direction of the time).
    """

    def get_ordering(self, request, queryset):
        ordering = list(super().get_ordering(request, queryset))
        if ordering and ordering[-1] in ("pk", "-pk", "id", "-id"):
            first = ordering[0] if isinstance(ordering[0], str) else None
            if first in ("created_at", "-created_at"):
                ordering[-1] = "-pk" if first.startswith("-") else "pk"
        return ordering

    def get_results(self, request):
        super().get_results(request)
        searched = getattr(self.paginator, "_search_page", None)
        if searched is not None and searched[0] == self.page_num:
            # The rows the search's paginator read already (a list of one page
            # or none would otherwise be read again, whole, as the queryset).
            self.result_list = searched[1]
        if self.paginator.at_least:
            # A search counted up to its next page: "Show all" would read every match.
            self.can_show_all = False
            if self.show_all:
                self.show_all = False
                self.result_list = self.paginator.page(self.page_num).object_list

    @cached_property
    def calendar_hierarchy(self):
        return calendar_hierarchy(self)


def calendar_hierarchy(cl):
    """
    The context of admin/date_hierarchy.html for ``cl`` (a ChangeList) as
    Django's date_hierarchy tag builds it, the choices being every year,
    month or day between the first and last row of the list (so some may
    hold no row) instead of the distinct dates of all its rows.
    """
    field_name = cl.date_hierarchy
    if not field_name:
        return None
    field = get_fields_from_path(cl.model, field_name)[-1]
    year_field, month_field, day_field = ("%s__%s" % (field_name, p) for p in ("year", "month", "day"))
    generic = "%s__" % field_name

    def link(filters):
        return cl.get_query_string(filters, [generic])

    try:
        year = int(cl.params[year_field]) if cl.params.get(year_field) else None
        month = int(cl.params[month_field]) if cl.params.get(month_field) else None
        day = int(cl.params[day_field]) if cl.params.get(day_field) else None
    except (TypeError, ValueError):
        return None
    if year and month and day:
        try:
            picked = datetime.date(year, month, day)
        except ValueError:
            return None
        return {
            "show": True,
            "back": {
                "link": link({year_field: year, month_field: month}),
                "title": capfirst(formats.date_format(picked, "YEAR_MONTH_FORMAT")),
            },
            "choices": [{"title": capfirst(formats.date_format(picked, "MONTH_DAY_FORMAT"))}],
        }
    # A search matches text no index holds: its first and last rows would be two
    # more walks of the table (whole walks for a rare text). A search is offered
    # the calendar of the whole log (two index lookups).
    first, last = _first_and_last(cl.root_queryset if cl.query else cl.queryset, field_name)
    if first is None or last is None:
        return {"show": False, "choices": []}
    if isinstance(first, datetime.datetime):
        first, last = (timezone.localtime(v) if timezone.is_aware(v) else v for v in (first, last))
        first, last = first.date(), last.date()
    if not year and first.year == last.year:
        year = first.year
        if first.month == last.month:
            month = first.month
    if year and month:
        try:
            days_in = calendar.monthrange(year, month)[1]
        except (ValueError, calendar.IllegalMonthError):
            return None
        days = [
            datetime.date(year, month, d)
            for d in range(1, days_in + 1)
            if first <= datetime.date(year, month, d) <= last
        ]
        return {
            "show": True,
            "back": {"link": link({year_field: year}), "title": str(year)},
            "choices": [
                {
                    "link": link({year_field: year, month_field: month, day_field: d.day}),
                    "title": capfirst(formats.date_format(d, "MONTH_DAY_FORMAT")),
                }
                for d in days
            ],
        }
    if year:
        months = [
            datetime.date(year, m, 1)
            for m in range(1, 13)
            if (first.year, first.month) <= (year, m) <= (last.year, last.month)
        ]
        return {
            "show": True,
            "back": {"link": link({}), "title": _all_dates()},
            "choices": [
                {
                    "link": link({year_field: year, month_field: m.month}),
                    "title": capfirst(formats.date_format(m, "YEAR_MONTH_FORMAT")),
                }
                for m in months
            ],
        }
    return {
        "show": True,
        "back": None,
        "choices": [{"link": link({year_field: y}), "title": str(y)} for y in range(first.year, last.year + 1)],
    }


def _first_and_last(queryset, field_name):
    """
    The first and last value of ``field_name`` in ``queryset``, in one query.
    On PostgreSQL, ORDER BY ... LIMIT 1 each way (the last as a subquery),
    each a walk of the time index from one end that stops at the list's first
    row there: MIN and MAX walk it so only for a plain table or index, and
    with a subquery filter (the envelopes holding a method's calls) they
    aggregated every row, 3 s on ten million calls.
    """
    if connections[queryset.db].vendor != "postgresql":
        # SQLite answers MIN and MAX of such a list from one read of the subquery's
        # rows (two ORDER BY ... LIMIT 1 read them twice: 0.2 s more on 1M calls).
        bounds = queryset.aggregate(first=Min(field_name), last=Max(field_name))
        return bounds["first"], bounds["last"]
    last = Subquery(queryset.order_by("-" + field_name).values(field_name)[:1])
    bounds = queryset.order_by(field_name).annotate(jsonrpc_last=last).values_list(field_name, "jsonrpc_last")[:1]
    row = next(iter(bounds), None)
    return row if row is not None else (None, None)


def _all_dates():
    from django.utils.translation import gettext

    return gettext("All dates")


# -- filter choices -------------------------------------------------------------


def method_choices(limit):
    """The registry's method names and those the rollups have seen, sorted, at most ``limit``."""
    from ..registry import registry

    names = {m.name for m in registry}
    rows = UsageRollup.objects.using(jsonrpc_settings.LOG_DATABASE).filter(width=Width.TOTAL, start=EPOCH)
    names.update(rows.order_by().values_list("method", flat=True).distinct()[: limit + 1])
    return sorted(names)[:limit]


def error_code_choices(limit):
    """The error codes the rollups have seen (all time), sorted, at most ``limit``."""
    rows = UsageRollup.objects.using(jsonrpc_settings.LOG_DATABASE).filter(
        width=Width.TOTAL, start=EPOCH, is_error=True
    )
    return sorted(set(rows.order_by().values_list("error_code", flat=True)))[:limit]


def distinct_users(model, limit, using=None):
    """
    [(user_id, latest username)] of the rows of ``model`` (Envelope or Call)
    that have a user, at most ``limit``, by user id: a skip scan of the
    partial (user, created_at) index, one index lookup per user (a recursive
    query), where ``SELECT DISTINCT`` would read the index whole.
    """
    conn = connections[using or jsonrpc_settings.LOG_DATABASE]
    if conn.vendor == "mysql":
        # No partial index there (Django leaves them out): no index to skip along.
        rows = (
            model._default_manager.db_manager(conn.alias).filter(user_id__isnull=False)
            .order_by("user_id").values_list("user_id", "username").distinct()
        )
        return list({pk: name for pk, name in rows[: limit * 10]}.items())[:limit]
    quote = conn.ops.quote_name
    table = quote(model._meta.db_table)
    user = quote(model._meta.get_field("user").column)
    created, name = quote("created_at"), quote("username")
    sql = (
        "WITH RECURSIVE u(uid, n) AS ("
        " SELECT (SELECT MIN({user}) FROM {table} WHERE {user} IS NOT NULL), 1"
        " UNION ALL"
        " SELECT (SELECT MIN({user}) FROM {table} WHERE {user} IS NOT NULL AND {user} > u.uid), n + 1"
        " FROM u WHERE u.uid IS NOT NULL AND n < %s)"
        " SELECT uid, (SELECT {name} FROM {table} WHERE {user} = u.uid ORDER BY {created} DESC LIMIT 1)"
        " FROM u WHERE uid IS NOT NULL"
    ).format(user=user, table=table, name=name, created=created)
    with conn.cursor() as cursor:
        cursor.execute(sql, [limit])
        return [(uid, username) for uid, username in cursor.fetchall()]


def known_error_codes():
    """The codes this app answers with itself: the protocol's and every JsonRpcError subclass's."""
    from .. import exceptions, protocol

    codes = {protocol.PARSE_ERROR, protocol.INVALID_REQUEST, protocol.METHOD_NOT_FOUND,
             protocol.INVALID_PARAMS, protocol.INTERNAL_ERROR}
    todo = [exceptions.JsonRpcError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if isinstance(getattr(cls, "code", None), int):
            codes.add(cls.code)
    return codes
