"""
Usage of each method from the call log, for the method browser: counts,
error rates and median durations, in bounded queries whatever the log's size.
"""

from datetime import timedelta

from django.db import connections
from django.db.models import Aggregate, Count, F, FloatField, Q, Window
from django.db.models.functions import Floor, RowNumber
from django.utils import timezone

from ..conf import jsonrpc_settings
from ..models import Call



class _Median(Aggregate):
    """PostgreSQL's PERCENTILE_CONT(0.5): the median, computed in the grouping query itself."""

    function = "PERCENTILE_CONT"
    name = "Median"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def _median_rows(calls):
    """Return {method: median duration} with one query: the middle row(s) of each method."""
    ranked = (
        calls.annotate(
            rank=Window(RowNumber(), partition_by=[F("method")], order_by=[F("duration_ms").asc(), F("id").asc()]),
            count=Window(Count("id"), partition_by=[F("method")]),
        )
        # Rows ((n + 1) // 2) and ((n + 2) // 2): the middle one, or the middle two.
        # Floor: MySQL's "/" of integers is a decimal division (5 / 2 = 2.5).
        .filter(rank__gte=Floor((F("count") + 1) / 2), rank__lte=Floor((F("count") + 2) / 2))
        .order_by()
        .values_list("method", "duration_ms")
    )
    middles = {}
    for method, duration in ranked:
        middles.setdefault(method, []).append(duration)
    return {method: sum(values) / len(values) for method, values in middles.items()}


def empty_usage():
    """Return the usage of a method never called."""
    usage = {}
    for suffix in ("", "_24h"):
        usage.update(
            {
                "count" + suffix: 0,
                "errors" + suffix: 0,
                "error_rate" + suffix: None,
                "error_pct" + suffix: None,
                "median_ms" + suffix: None,
            }
        )
    return usage


def usage_stats(method=None, now=None):
    """
    Return {method name: usage} from the call log in bounded queries, whatever its size.

    One grouped query on PostgreSQL (medians by ``PERCENTILE_CONT``); elsewhere
    one for the counts and one per median (the middle rows by window functions).

    Usage holds ``count``, ``errors``, ``error_rate`` (0..1), ``error_pct`` and
    ``median_ms`` (milliseconds) for all time, and the same with ``_24h`` for
    the last 24 hours. Give ``method`` to read only that method's calls.
    """
    since = (now or timezone.now()) - timedelta(hours=24)
    calls = Call.objects.using(jsonrpc_settings.LOG_DATABASE).exclude(method="")
    if method is not None:
        calls = calls.filter(method=method)
    recent = Q(created_at__gte=since)
    errors = Q(outcome="error")
    stats = {}
    aggregates = {
        "count": Count("id"),
        "errors": Count("id", filter=errors),
        "count_24h": Count("id", filter=recent),
        "errors_24h": Count("id", filter=recent & errors),
    }
    in_sql = connections[calls.db].vendor == "postgresql"
    if in_sql:
        aggregates["median_ms"] = _Median("duration_ms")
        aggregates["median_ms_24h"] = _Median("duration_ms", filter=recent)
    counts = calls.order_by().values("method").annotate(**aggregates)
    for row in counts:
        for suffix in ("", "_24h"):
            n = row["count" + suffix]
            row["error_rate" + suffix] = row["errors" + suffix] / n if n else None
            row["error_pct" + suffix] = 100.0 * row["errors" + suffix] / n if n else None
            row.setdefault("median_ms" + suffix, None)
        stats[row["method"]] = row
    if stats and not in_sql:
        for name, median in _median_rows(calls).items():
            stats[name]["median_ms"] = median
        for name, median in _median_rows(calls.filter(recent)).items():
            stats[name]["median_ms_24h"] = median
    return stats
