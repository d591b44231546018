"""
The README and the docs pages against the code: the README links every page of
the site, its two commands are the Makefile's targets CI runs, its limits are
conf.py's defaults; the error-code tables list every error class; no text is
written twice (each paragraph lives in one file); and every page's markers are
filled in by docs/hooks.py. (`mkdocs build --strict` itself, with its link and
anchor checks, is `make docs`: .ci/run pass 6.)
"""

import re
import sys
from pathlib import Path

import pytest

from jsonrpc_app import exceptions
from jsonrpc_app.conf import DEFAULTS

from .test_docs_reference import load_hooks

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()


def nav_pages():
    """The files of mkdocs.yml's nav, in order."""
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    return re.findall(r"^  - [^:]+: (\S+\.md)$", nav, re.M)


def section(text, title, level="##"):
    match = re.search(r"^%s %s\n(.*?)(?=^%s |\Z)" % (level, re.escape(title), level), text, re.S | re.M)
    assert match, "no section %r" % title
    return match.group(1)


def outside_code(text):
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def test_every_docs_page_is_in_the_nav_and_the_readme_links_each():
    pages = nav_pages()
    assert pages[0] == "index.md" and pages[-1] == "changelog.md"
    assert sorted(pages) == sorted(p.name for p in DOCS.glob("*.md"))
    documentation = section(README, "Documentation")
    linked = re.findall(r"\]\((docs/[^)#]+|CHANGELOG\.md)\)", documentation)
    expected = ["docs/%s" % page for page in pages[1:-1]] + ["CHANGELOG.md"]
    assert linked == expected  # every page, in the nav's order
    assert "`make docs`" in documentation and "build/site" in documentation


def test_every_relative_link_of_the_readme_resolves():
    links = re.findall(r"\]\(([^)]+)\)", outside_code(README))
    relative = [link for link in links if not re.match(r"https?://", link)]
    assert relative
    for link in relative:
        path, _, anchor = link.partition("#")
        assert (ROOT / path).exists(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", outside_code((ROOT / path).read_text()), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, link


def test_the_readme_stays_short():
    assert len(README.splitlines()) < 200
    assert [title for title in re.findall(r"^## (.+)$", outside_code(README), re.M)] == [
        "What it is",
        "The two commands",
        "Quick start in your own project",
        "Limits",
        "Documentation",
    ]


def test_the_two_commands_are_the_makefile_targets_and_ci_runs_the_test_command():
    commands = section(README, "The two commands")
    given = re.findall(r"^(make \w+)\s+#", commands, re.M)
    assert given == ["make run", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for command in given:
        assert re.search(r"^%s:" % command.split()[1], makefile, re.M), command
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)  # pass 1, SQLite, exactly the README's command
    # The curl line the README says `make run` prints is the one it prints.
    curl = re.search(r"^curl .*$", commands, re.M).group(0)
    printed = re.search(r'@echo "Try it:\s+(curl .*)"$', makefile, re.M).group(1)
    printed = printed.replace('\\"', '"').replace("$(HOST)", "127.0.0.1").replace("$(PORT)", "8000")
    assert printed == curl


def test_the_readme_limits_are_the_defaults():
    limits = " ".join(section(README, "Limits").split())
    body = re.search(r"a body over (\d+) MiB \(`MAX_BODY_SIZE`\)", limits)
    assert int(body.group(1)) * 1024 * 1024 == DEFAULTS["MAX_BODY_SIZE"]
    batch = re.search(r"more than ([\d,]+) calls \(`MAX_BATCH_SIZE`\)", limits)
    assert int(batch.group(1).replace(",", "")) == DEFAULTS["MAX_BATCH_SIZE"]
    depth = re.search(r"deeper than (\d+) levels \(`MAX_DEPTH`\)", limits)
    assert int(depth.group(1)) == DEFAULTS["MAX_DEPTH"]
    digits = re.search(r"more than ([\d,]+) digits is `-32700`", limits)
    assert int(digits.group(1).replace(",", "")) == sys.int_info.default_max_str_digits
    # The same figures in the Security page's table of limits.
    table = section((DOCS / "security.md").read_text(), "Limits")
    assert "1 MiB (1,048,576 bytes)" in table and "| 1,000 calls |" in table and "| 64 levels" in table


def error_classes():
    return [
        cls
        for cls in vars(exceptions).values()
        if isinstance(cls, type) and issubclass(cls, exceptions.JsonRpcError) and cls is not exceptions.JsonRpcError
    ]


def table_rows(text):
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (-\d+) \| ([^|]+) \|", text, re.M)}


def test_the_error_code_table_lists_every_error_class_with_its_message():
    rows = table_rows(section((DOCS / "methods.md").read_text(), "Error codes"))
    classes = error_classes()
    assert len(classes) >= 12
    for cls in classes:
        assert cls.code in rows, cls
        assert rows[cls.code].strip() == cls.message, cls
    assert set(rows) == {cls.code for cls in classes}


def test_the_server_error_code_table_lists_every_server_error():
    rows = table_rows(section((DOCS / "security.md").read_text(), "Server error codes"))
    server = {cls.code: cls.message for cls in error_classes() if -32099 <= cls.code <= -32000}
    assert set(rows) == set(server)
    for code, message in server.items():
        assert rows[code].startswith(message), code


def paragraphs(text):
    blocks = (" ".join(block.split()) for block in re.split(r"\n\s*\n", text))
    return [b for b in blocks if len(b) >= 100 and not b.startswith(("|", "```", "<!--"))]


def test_each_paragraph_is_written_in_one_file():
    files = {path.name: path.read_text() for path in DOCS.glob("*.md")}
    files["README.md"] = README
    files["CHANGELOG.md"] = (ROOT / "CHANGELOG.md").read_text()
    where = {}
    for name, text in files.items():
        for paragraph in paragraphs(text):
            where.setdefault(paragraph, []).append(name)
    assert {p[:80]: names for p, names in where.items() if len(names) > 1} == {}


@pytest.mark.parametrize("page", nav_pages())
def test_every_marker_of_a_page_is_filled_in(page):
    markdown = load_hooks().on_page_markdown((DOCS / page).read_text(), None, None, None)
    assert "<!-- settings -->" not in markdown and "<!-- readme:" not in markdown
    assert "<!-- api:" not in markdown and "<!-- changelog -->" not in markdown
    # Links carried from the README point at the neighbouring pages, not at docs/.
    assert "](docs/" not in markdown and "](CHANGELOG.md)" not in markdown
