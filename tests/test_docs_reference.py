"""
The docs site's generated parts (docs/hooks.py): the settings table holds every
key of conf.DEFAULTS with its default, the API listing every public name, the
changelog page CHANGELOG.md. (`mkdocs build --strict` itself runs in the docs venv:
docs/requirements.txt.)
"""

import importlib.util
from pathlib import Path

import pytest

from jsonrpc_app import test as test_module
from jsonrpc_app.conf import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_settings_table_has_every_default_with_its_value_and_comment():
    table = load_hooks().settings_table().splitlines()
    rows = {line.split("|")[1].strip().strip("`"): line for line in table[2:]}
    assert list(rows) == list(DEFAULTS)
    for key, value in DEFAULTS.items():
        default = rows[key].split("|")[2].strip().strip("`")
        # Our own conf.py as written: literals and products such as 64 * 1024.
        assert eval(default, {"__builtins__": {}}) == value, key
    assert "Call log: " in rows["LOG_POLICY"]
    # A key written under another's comment takes the comment that names it, else its group's.
    for key in DEFAULTS:
        assert rows[key].split("|")[3].strip(), key
    assert "the power-loss window" in rows["LOG_JOURNAL_FSYNC_INTERVAL"]  # its own comment
    assert "LOG_JOURNAL_FULL says what happens" in rows["LOG_JOURNAL_FULL"]  # the comment that names it
    assert "DRF policies of the endpoint" in rows["THROTTLE_CLASSES"]


def test_api_listing_names_every_public_class_and_method():
    listing = load_hooks().api_listing("jsonrpc_app.test")
    for name in ("RpcClient", "Batch", "BatchCall", "UnexpectedResponse"):
        assert "### `%s`" % name in listing
    for method in ("call", "acall", "notify", "anotify", "batch", "raw", "araw", "error_class"):
        assert "`%s(" % method in listing or "`async %s(" % method in listing, method
        assert getattr(test_module.RpcClient, method).__doc__.split("\n")[0].strip()[:30] in listing


def test_changelog_page_is_the_changelog_file():
    page = load_hooks().on_page_markdown("# Changelog\n\n<!-- changelog -->\n", None, None, None)
    assert "## [Unreleased]" in page and "## [0.1.0] - 2026-12-02" in page
    assert page.count("# Changelog") == 1


def test_a_readme_section_is_carried_into_a_page_whole():
    page = load_hooks().on_page_markdown("# Demo\n\n<!-- readme:The two commands -->\n", None, None, None)
    assert "make run" in page and "DATABASE_URL" in page
    assert "INSTALLED_APPS" not in page  # it stops at the next section


def test_a_readme_section_links_the_sites_pages_as_neighbours():
    section = load_hooks().readme_section("Documentation")
    assert "](security.md#limits)" in load_hooks().readme_section("Limits")
    assert "](quickstart.md)" in section and "](changelog.md)" in section and "](index.md)" in section
    assert "](docs/" not in section and "](CHANGELOG.md)" not in section


def test_a_readme_section_that_does_not_exist_fails_the_build():
    with pytest.raises(ValueError, match="no section"):
        load_hooks().readme_section("No such section")
