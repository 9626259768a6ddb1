"""A template field without `{` is rendered without Jinja, exactly as Jinja would render it.

The runner imports Jinja only for a try whose fields hold a tag; the property below compares the
shortcut with the real environment on arbitrary text (newlines of every kind, `%`, `#`, unicode).
"""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from zonda.tries import templating

TEXT = st.text(alphabet=st.characters(blacklist_characters="{", blacklist_categories=("Cs",)), max_size=60)
NEWLINE_HEAVY = st.lists(
    st.sampled_from(["a", " ", "\n", "\r\n", "\r", "%", "#", "}", "\t"]), max_size=12
).map("".join)


@given(st.one_of(TEXT, NEWLINE_HEAVY))
def test_plain_text_renders_as_jinja_renders_it(text: str) -> None:
    expected = templating.create_environment().from_string(text).render({})
    assert templating.render(text, {}) == expected


def test_a_try_without_tags_never_imports_jinja() -> None:
    code = (
        "import sys\n"
        "from zonda.tries import templating\n"
        "assert templating.render(['echo hi', {'a': 'b'}], {}) == ['echo hi', {'a': 'b'}]\n"
        "assert 'jinja2' not in sys.modules, 'jinja2 imported'\n"
        "assert templating.render('{{ 1 + 1 }}', {}) == '2'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
