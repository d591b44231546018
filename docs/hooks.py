"""
MkDocs hooks: the Reference page's tables and the Changelog page, written from
the sources when the site is built, so that they cannot drift from the code.

Nothing is imported from jsonrpc_app (the docs build needs no Django): the
sources are read with ``ast``.

- ``<!-- settings -->`` becomes the table of ``jsonrpc_app.conf.DEFAULTS``: each
  key, its default as written, and the comment above it;
- ``<!-- api:MODULE -->`` becomes the public classes and functions of a module
  with their signatures and the first paragraph of their docstrings;
- ``<!-- changelog -->`` becomes CHANGELOG.md;
- ``<!-- readme:TITLE -->`` becomes the README's section ``## TITLE`` (its
  body, up to the next ``## `` heading), so that a page can carry a section
  the README keeps (what it is, the two commands, the quick start, the list of
  pages), written once. The README's links to ``docs/PAGE.md`` and
  ``CHANGELOG.md`` become links between the site's pages.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jsonrpc_app"


def settings_table():
    source = (PACKAGE / "conf.py").read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    (defaults,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DEFAULTS" for t in node.targets)
    ]
    rows = ["| setting | default | what it does |", "| --- | --- | --- |"]
    previous_end = defaults.lineno
    comments = []  # every comment so far, in order
    for key, value in zip(defaults.keys, defaults.values):
        comment = []
        for line in lines[previous_end : key.lineno - 1]:
            stripped = line.strip()
            if stripped.startswith("#"):
                comment.append(stripped.lstrip("#").strip())
            elif stripped:
                comment = []
        previous_end = value.end_lineno
        if comment:
            text = " ".join(comment)
            comments.append(text)
        else:
            # A key written under another's comment ("PERMISSION_CLASSES" under the
            # DRF policies, "LOG_JOURNAL_FSYNC_INTERVAL" under "LOG_JOURNAL_FSYNC"):
            # the latest comment that names it, else the one its group is under.
            text = next((c for c in reversed(comments) if key.value in c), comments[-1] if comments else "")
        default = " ".join(ast.get_source_segment(source, value).split())
        text = text.replace("|", "\\|")
        rows.append("| `%s` | `%s` | %s |" % (key.value, default.replace("|", "\\|"), text))
    return "\n".join(rows)


def _first_paragraph(doc):
    doc = (doc or "").strip()
    return " ".join(doc.split("\n\n", 1)[0].split())


def api_listing(module):
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    tree = ast.parse(path.read_text())
    out = ["Module `%s`: %s" % (module, _first_paragraph(ast.get_docstring(tree))), ""]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            if isinstance(node, ast.ClassDef):
                out.append("### `%s`" % node.name)
                out.append("")
                out.append(_first_paragraph(ast.get_docstring(node)) or "")
                out.append("")
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("_"):
                        doc = _first_paragraph(ast.get_docstring(item))
                        if any(getattr(d, "id", None) == "property" for d in item.decorator_list):
                            out.append("- `%s` (property): %s" % (item.name, doc))
                            continue
                        prefix = "async " if isinstance(item, ast.AsyncFunctionDef) else ""
                        args = ast.unparse(item.args)
                        out.append("- `%s%s(%s)`: %s" % (prefix, item.name, args, doc))
                out.append("")
            else:
                out.append("### `%s(%s)`" % (node.name, ast.unparse(node.args)))
                out.append("")
                out.append(_first_paragraph(ast.get_docstring(node)))
                out.append("")
    return "\n".join(out)


def readme_section(title):
    """The body of the README's ``## title`` section; a title the README lacks fails the build."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^## %s\n(.*?)(?=^## |\Z)" % re.escape(title), text, re.S | re.M)
    if match is None:
        raise ValueError("README.md has no section '## %s'" % title)
    body = match.group(1).strip()
    # The README links to the pages as docs/PAGE.md (so that they work on GitHub); here
    # they are neighbours. docs/ itself is the home page, CHANGELOG.md the Changelog page.
    body = re.sub(r"\]\(docs/\)", "](index.md)", body)
    body = re.sub(r"\]\(docs/([^)]+)\)", r"](\1)", body)
    body = body.replace("](CHANGELOG.md)", "](changelog.md)")
    # Links to other README sections (#anchor) point at the README on this site's home page.
    return re.sub(r"\]\(#([\w-]+)\)", r"](index.md)", body)


def on_page_markdown(markdown, page, config, files):
    if "<!-- settings -->" in markdown:
        markdown = markdown.replace("<!-- settings -->", settings_table())
    markdown = re.sub(r"<!-- api:([\w.]+) -->", lambda m: api_listing(m.group(1)), markdown)
    markdown = re.sub(r"<!-- readme:(.+?) -->", lambda m: readme_section(m.group(1)), markdown)
    if "<!-- changelog -->" in markdown:
        changelog = (ROOT / "CHANGELOG.md").read_text()
        # The page has its own title; the file's first heading is dropped.
        markdown = markdown.replace("<!-- changelog -->", changelog.split("\n", 1)[1])
    return markdown
