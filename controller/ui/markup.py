"""A DAG's or task's `doc_md` as HTML: CommonMark by markdown-it-py, then sanitised by nh3 (ammonia).

Raw HTML in the Markdown is not passed through by the parser (`html: False`), and the output is
cleaned again with an allow-list, so a `<script>` or an `onerror=` in a doc stays inert text.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_PARSER = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def render_markdown(text: str | None) -> str:
    if not text:
        return ""
    return nh3.clean(_PARSER.render(text), link_rel="noopener noreferrer nofollow")
