"""
The usage dashboard in a real headless Chromium: with two days of traffic
and with none, light and dark. The charts are inline SVG drawn in the admin's
colours: each must be visible, as wide as its module, and its bars and lines
painted in a colour that differs from the page behind them in both themes.

Screenshots go to test-artifacts/screenshots/usage-dashboard-*.png (`make
screenshots` copies them to docs/).
"""

import pytest

from tests.helpers import seed_usage

pytestmark = pytest.mark.django_db(transaction=True)

USAGE = "/admin/jsonrpc_app/usagerollup/"


def _colour(page, selector, prop):
    return page.eval_on_selector(selector, "(el, prop) => getComputedStyle(el)[prop]", prop)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_dashboard_draws_calls_errors_and_latency_charts(new_page, superuser, screenshot, scheme):
    seed_usage(days=2, per_hour=40)
    page = new_page(color_scheme=scheme, user=superuser)
    page.goto("/admin/jsonrpc_app/")
    page.click("#content-main a[href='%s']" % USAGE)
    page.wait_for_selector("#usage-charts")
    assert page.locator(".breadcrumbs").inner_text().split() == ["Home", "›", "JSON-RPC", "›", "Usage"]
    charts = page.locator("svg.jsonrpc-chart")
    assert charts.count() == 3
    for i in range(3):
        box = charts.nth(i).bounding_box()
        assert box["width"] > 500 and box["height"] > 100, box
    assert page.locator("svg.jsonrpc-chart rect.jsonrpc-chart-bar").count() == 24
    assert page.locator("polyline.jsonrpc-chart-p99").count() >= 1
    background = _colour(page, "svg.jsonrpc-chart", "backgroundColor")
    for selector, prop in (
        ("rect.jsonrpc-chart-bar", "fill"),
        ("rect.jsonrpc-chart-bar-error", "fill"),
        ("polyline.jsonrpc-chart-p50", "stroke"),
        ("polyline.jsonrpc-chart-p95", "stroke"),
        ("polyline.jsonrpc-chart-p99", "stroke"),
        ("text.jsonrpc-chart-label", "fill"),
    ):
        colour = _colour(page, selector, prop)
        assert colour not in (background, "none", "rgb(0, 0, 0)", ""), (selector, colour)
    # The body follows the theme: dark admin, dark chart background.
    dark = scheme == "dark"
    r, g, b = [int(x) for x in background[background.index("(") + 1:background.index(")")].split(",")[:3]]
    assert (r + g + b < 200) == dark, background
    screenshot(page, "usage-dashboard-%s" % scheme)

    # Hour range, then one method, by plain links and the form.
    page.click("a[data-range=hour]")
    page.wait_for_url("**range=hour**")
    assert page.locator("svg.jsonrpc-chart rect.jsonrpc-chart-bar").count() > 30
    page.select_option("#usage-method", "subtract")
    page.click("#usage-form input[type=submit]")
    page.wait_for_url("**method=subtract**")
    assert page.locator("h1").inner_text() == "Usage of subtract"
    rows = page.locator("tr.jsonrpc-usage-method")
    assert rows.count() == 1 and rows.first.get_attribute("data-method") == "subtract"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_dashboard_with_no_calls_shows_its_empty_state(new_page, superuser, screenshot, scheme):
    page = new_page(color_scheme=scheme, user=superuser)
    page.goto(USAGE + "?range=hour")
    empty = page.locator("#usage-empty")
    assert empty.is_visible()
    assert "No call was logged in the last hour." in empty.inner_text()
    assert page.locator("svg.jsonrpc-chart").count() == 0
    screenshot(page, "usage-dashboard-empty-%s" % scheme)
