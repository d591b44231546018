"""
The usage dashboard's charts as server-rendered SVG: no script and no
library, so the admin works offline. Colours are classes (admin.css) over
the admin's CSS variables, so the charts follow its light and dark themes.
Each bar or point has a <title>: the browser shows its figures on hover.
"""

import math

from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _

WIDTH = 800
LEFT, RIGHT, TOP, BOTTOM = 60, 14, 12, 26
PLOT_W = WIDTH - LEFT - RIGHT


def nice_max(value):
    """The smallest of 1, 2, 2.5, 5 x 10^k that is >= ``value`` (1 for nothing)."""
    if not value or value <= 0:
        return 1
    exp = math.floor(math.log10(value))
    for m in (1, 2, 2.5, 5, 10):
        top = m * 10**exp
        if top >= value * (1 - 1e-9):
            return top
    return 10 ** (exp + 1)


def number(value, unit=""):
    if value is None:
        return "\u2013"
    if abs(value) >= 1000 and float(value).is_integer():
        text = "{:,}".format(int(value)).replace(",", "\u202f")
    elif float(value).is_integer():
        text = str(int(value))
    elif abs(value) >= 100:
        text = "%.0f" % value
    elif abs(value) >= 10:
        text = "%.1f" % value
    else:
        text = "%.3g" % value
    return text + unit


def _frame(label, top, unit, ticks_x, height):
    PLOT_H = height - TOP - BOTTOM
    out = [
        '<svg class="jsonrpc-chart" viewBox="0 0 %d %d" role="img" aria-label="%s" '
        'xmlns="http://www.w3.org/2000/svg">' % (WIDTH, height, escape(label)),
        "<title>%s</title>" % escape(label),
    ]
    for i in range(5):
        value = top * i / 4
        y = TOP + PLOT_H - PLOT_H * i / 4
        out.append('<line class="jsonrpc-chart-grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>' % (LEFT, LEFT + PLOT_W, y, y))
        out.append(
            '<text class="jsonrpc-chart-label" x="%d" y="%.1f" text-anchor="end">%s</text>'
            % (LEFT - 6, y + 4, escape(number(value, unit)))
        )
    for x, text in ticks_x:
        out.append('<line class="jsonrpc-chart-tick" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>' % (x, x, TOP + PLOT_H, TOP + PLOT_H + 4))
        out.append(
            '<text class="jsonrpc-chart-label" x="%.1f" y="%d" text-anchor="middle">%s</text>'
            % (x, TOP + PLOT_H + 17, escape(text))
        )
    out.append(
        '<line class="jsonrpc-chart-axis" x1="%d" x2="%d" y1="%d" y2="%d"/>' % (LEFT, LEFT + PLOT_W, TOP + PLOT_H, TOP + PLOT_H)
    )
    return out


def _slot(n):
    return PLOT_W / max(n, 1)


def _x_ticks(labels, n_ticks=6):
    """About ``n_ticks`` labels under the slots, evenly spread."""
    n = len(labels)
    if not n:
        return []
    every = max(1, math.ceil(n / n_ticks))
    slot = _slot(n)
    return [(LEFT + slot * (i + 0.5), labels[i]) for i in range(0, n, every)]


def bars(label, labels, totals, highlights, tips, height=190):
    """Bars of ``totals`` with the part ``highlights`` (errors) drawn over each in its own colour."""
    PLOT_H = height - TOP - BOTTOM
    top = nice_max(max(totals, default=0))
    slot = _slot(len(totals))
    gap = min(2.0, slot * 0.2)
    out = _frame(label, top, "", _x_ticks(labels), height)
    for i, (total, part, tip) in enumerate(zip(totals, highlights, tips)):
        if not total:
            continue
        x = LEFT + slot * i + gap / 2
        h = PLOT_H * total / top
        out.append(
            '<rect class="jsonrpc-chart-bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s</title></rect>'
            % (x, TOP + PLOT_H - h, slot - gap, h, escape(tip))
        )
        if part:
            e = PLOT_H * part / top
            out.append(
                '<rect class="jsonrpc-chart-bar-error" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s</title></rect>'
                % (x, TOP + PLOT_H - e, slot - gap, e, escape(tip))
            )
    out.append("</svg>")
    return mark_safe("".join(out))


def lines(label, labels, named_values, unit, tips, height=160):
    """
    One line per (css class, values) of ``named_values``; a value of None (no
    calls there) breaks its line, and a lone value is drawn as a dot.
    """
    PLOT_H = height - TOP - BOTTOM
    top = nice_max(max((v for _cls, values in named_values for v in values if v is not None), default=0))
    slot = _slot(len(labels))
    out = _frame(label, top, unit, _x_ticks(labels), height)
    for cls, values in named_values:
        runs, run = [], []
        for i, v in enumerate(values):
            if v is None:
                if run:
                    runs.append(run)
                run = []
                continue
            run.append((LEFT + slot * (i + 0.5), TOP + PLOT_H - PLOT_H * min(v, top) / top, i))
        if run:
            runs.append(run)
        for run in runs:
            if len(run) > 1:
                out.append(
                    '<polyline class="jsonrpc-chart-line %s" points="%s"/>'
                    % (cls, " ".join("%.1f,%.1f" % (x, y) for x, y, _i in run))
                )
            for x, y, i in run:
                out.append(
                    '<circle class="jsonrpc-chart-dot %s" cx="%.1f" cy="%.1f" r="%s"><title>%s</title></circle>'
                    % (cls, x, y, "2.5" if len(run) == 1 or len(labels) <= 60 else "1.2", escape(tips[i]))
                )
    out.append("</svg>")
    return mark_safe("".join(out))


SPANS = {60: _("minute"), 3600: _("hour"), 6 * 3600: _("6 hours")}


def span_text(span):
    """"minute", "hour", "6 hours" for the dashboard's points."""
    seconds = int(span.total_seconds())
    return SPANS.get(seconds) or "%d s" % seconds


def point_label(start, range_name):
    if range_name == "30d":
        return start.strftime("%b %d")
    return start.strftime("%H:%M")


def usage_charts(figures):
    """The three charts of a dashboard.series() result: calls, error rate, latency."""
    points = figures["points"]
    range_name = figures["range"]
    labels = [point_label(p["start"], range_name) for p in points]
    fmt = "%Y-%m-%d %H:%M"
    tips = []
    for p in points:
        tips.append(
            _("%(start)s UTC: %(calls)s calls, %(errors)s errors, p50 %(p50)s, p95 %(p95)s, p99 %(p99)s")
            % {
                "start": p["start"].strftime(fmt),
                "calls": p["calls"],
                "errors": p["errors"],
                "p50": number(p["p50"], " ms"),
                "p95": number(p["p95"], " ms"),
                "p99": number(p["p99"], " ms"),
            }
        )
    return {
        "calls": bars(_("Calls"), labels, [p["calls"] for p in points], [p["errors"] for p in points], tips),
        "errors": lines(
            _("Error rate"), labels, [("jsonrpc-chart-errors", [p["error_pct"] for p in points])], "%", tips
        ),
        "latency": lines(
            _("Latency"),
            labels,
            [
                ("jsonrpc-chart-p50", [p["p50"] for p in points]),
                ("jsonrpc-chart-p95", [p["p95"] for p in points]),
                ("jsonrpc-chart-p99", [p["p99"] for p in points]),
            ],
            " ms",
            tips,
            height=190,
        ),
    }
