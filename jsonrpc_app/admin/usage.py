"""
Usage of the methods, read from the usage rollups (jsonrpc_app.models.UsageRollup,
maintained by jsonrpc_app.log.rollup), never from Call: the method browser's
and a method page's counts, error rates and median durations, and the usage
dashboard's series over the last hour, day or 30 days. Every query reads a
bounded number of rollup rows whatever the size of the log.

Percentiles are estimates from the fixed duration histogram: the value at the
wanted rank, interpolated linearly inside its bucket, and clamped to the
bucket's shortest and longest call.
"""

import datetime

from django.db.models import Max, Min, Q, Sum

from ..conf import jsonrpc_settings
from ..log.rollup import EPOCH
from ..models import HISTOGRAM_BOUNDS_MS, HISTOGRAM_FIELDS, UsageRollup, Width

_UTC = datetime.timezone.utc

# The dashboard's ranges: (rollup width, how many of its buckets, buckets per point).
RANGES = {
    "hour": (Width.MINUTE, 60, 1),
    "day": (Width.HOUR, 24, 1),
    "30d": (Width.HOUR, 30 * 24, 6),
}


def _sums():
    """The aggregates of a group of rows, named "sum_<column>" (a name may not be a column's)."""
    sums = {
        "calls": Sum("calls"),
        "errors": Sum("calls", filter=Q(is_error=True)),
        "duration_sum": Sum("duration_sum"),
        "duration_min": Min("duration_min"),
        "duration_max": Max("duration_max"),
    }
    for name in HISTOGRAM_FIELDS:
        sums[name] = Sum(name)
    return {"sum_" + name: value for name, value in sums.items()}


def _grouped(rows, *by):
    """``rows`` grouped by the columns ``by``, each as a dict of plain names (calls, errors, h00...)."""
    for row in rows.values(*by).annotate(**_sums()):
        yield {name[4:] if name.startswith("sum_") else name: value for name, value in row.items()}


def percentile(row, q):
    """
    Estimate the ``q`` quantile (0..1) of the durations summed in ``row``
    (calls, duration_min, duration_max, h00..h16); None when it counts no call.
    """
    n = row.get("calls") or 0
    if not n:
        return None
    low, high = row.get("duration_min") or 0.0, row.get("duration_max") or 0.0
    rank = q * n
    seen = 0
    for i, name in enumerate(HISTOGRAM_FIELDS):
        k = row.get(name) or 0
        if not k:
            continue
        if seen + k >= rank:
            lo = HISTOGRAM_BOUNDS_MS[i - 1] if i else 0.0
            hi = HISTOGRAM_BOUNDS_MS[i] if i < len(HISTOGRAM_BOUNDS_MS) else high
            lo, hi = max(lo, low), min(hi, high)
            if hi < lo:
                hi = lo
            return lo + (hi - lo) * max(0.0, rank - seen) / k
        seen += k
    return high


def _rows(width, since=None, method=None, source=None, using=None):
    rows = UsageRollup.objects.using(using or jsonrpc_settings.LOG_DATABASE).filter(width=width)
    if width == Width.TOTAL:
        rows = rows.filter(start=EPOCH)
    elif since is not None:
        rows = rows.filter(start__gte=since)
    if method is not None:
        rows = rows.filter(method=method)
    if source:
        rows = rows.filter(source=source)
    return rows.order_by()


def _finish(row, suffix=""):
    n = row.get("calls") or 0
    errors = row.get("errors") or 0
    return {
        "count" + suffix: n,
        "errors" + suffix: errors,
        "error_rate" + suffix: errors / n if n else None,
        "error_pct" + suffix: 100.0 * errors / n if n else None,
        "median_ms" + suffix: percentile(row, 0.5),
    }


def empty_usage():
    """Return the usage of a method never called."""
    usage = _finish({})
    usage.update(_finish({}, "_24h"))
    return usage


def floor(now, width):
    now = now.astimezone(_UTC)
    if width == Width.MINUTE:
        return now.replace(second=0, microsecond=0)
    return now.replace(minute=0, second=0, microsecond=0)


def usage_stats(method=None, now=None):
    """
    Return {method name: usage} from the rollups, in two queries.

    Usage holds ``count``, ``errors``, ``error_rate`` (0..1), ``error_pct`` and
    ``median_ms`` (milliseconds, estimated) for all time, and the same with
    ``_24h`` for the last 24 hours, to the hour (the current hour and the 23
    before it). Give ``method`` to read only that method's rows.
    """
    now = now or datetime.datetime.now(_UTC)
    since = floor(now, Width.HOUR) - datetime.timedelta(hours=23)
    stats = {}
    for row in _grouped(_rows(Width.TOTAL, method=method).exclude(method=""), "method"):
        stats[row["method"]] = {**_finish(row), **_finish({}, "_24h")}
    for row in _grouped(_rows(Width.HOUR, since, method=method).exclude(method=""), "method"):
        usage = stats.setdefault(row["method"], empty_usage())
        usage.update(_finish(row, "_24h"))
    return stats


def _summary(row):
    n = row.get("calls") or 0
    errors = row.get("errors") or 0
    return {
        "calls": n,
        "errors": errors,
        "error_pct": 100.0 * errors / n if n else None,
        "mean_ms": (row.get("duration_sum") or 0.0) / n if n else None,
        "p50": percentile(row, 0.50),
        "p95": percentile(row, 0.95),
        "p99": percentile(row, 0.99),
    }


def _add(into, row):
    for name in ("calls", "errors", "duration_sum") + HISTOGRAM_FIELDS:
        into[name] = (into.get(name) or 0) + (row.get(name) or 0)
    for name, pick in (("duration_min", min), ("duration_max", max)):
        value = row.get(name)
        if value is not None and (row.get("calls") or 0):
            into[name] = value if into.get(name) is None else pick(into[name], value)


def series(range_name, method=None, source=None, now=None, using=None):
    """
    Return the dashboard's figures for ``range_name`` (a key of RANGES):
    {"points": [{"start", "calls", "errors", "error_pct", "p50", "p95", "p99"}, ...]
    oldest first, one per point whether or not it holds calls; "total": the
    same summed over the range; "methods": per method, busiest first}.
    Two queries, each over at most the range's rollup rows.
    """
    width, count, per_point = RANGES[range_name]
    now = now or datetime.datetime.now(_UTC)
    step = datetime.timedelta(seconds=int(width))
    last = floor(now, width)
    first = last - step * (count - 1)
    # Points of several buckets (30 days: 6 hours) start on a multiple of their span.
    span = step * per_point
    first_point = EPOCH + ((first - EPOCH) // span) * span
    rows = _rows(width, first, method=method, source=source, using=using)
    by_start = {r["start"]: r for r in _grouped(rows, "start")}
    points = []
    at = first_point
    while at <= last:
        merged = {}
        for i in range(per_point):
            row = by_start.get(at + step * i)
            if row is not None:
                _add(merged, row)
        points.append({"start": at, **_summary(merged)})
        at += span
    total = {}
    for row in by_start.values():
        _add(total, row)
    methods = [
        {"method": r["method"], **_summary(r)}
        for r in _grouped(_rows(width, first, method=method, source=source, using=using), "method")
    ]
    methods.sort(key=lambda m: (-m["calls"], m["method"]))
    return {
        "range": range_name,
        "width": int(width),
        "span": span,
        "first": first_point,
        "last": last,
        "points": points,
        "total": _summary(total),
        "methods": methods,
    }


def method_names(using=None):
    """The methods the rollups have seen, all time (one query over the all-time rows)."""
    rows = _rows(Width.TOTAL, using=using).exclude(method="").values_list("method", flat=True).distinct()
    return sorted(set(rows))
