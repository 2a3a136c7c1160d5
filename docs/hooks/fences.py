"""mkdocs hook: a fence's info string keeps only its language for the site.

The guides tag blocks the docs test does not run with a reason after the
language (```` ```python fragment: needs a secured cluster ````; see
tests/docs/test_docs_blocks.py). Python-Markdown's fences accept a language
and attributes only, so such a fence would not open a code block and the page
below it would render as code. The reason is for the docs test and for readers
of the Markdown source; the site shows the block as code in its language.
"""

from __future__ import annotations

import re
from typing import Any

_OPENING = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<lang>[\w+#.-]+)[ \t]+\S.*$")


def on_page_markdown(markdown: str, **_: Any) -> str:
    lines = markdown.split("\n")
    fence: str | None = None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if fence is not None:
            # Inside a block: only its own closing fence ends it.
            if stripped.startswith(fence) and not stripped.strip(fence[0]).strip():
                fence = None
            continue
        opening = _OPENING.match(line)
        if opening is not None:
            fence = opening.group("fence")
            lines[i] = opening.group("indent") + fence + opening.group("lang")
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]
    return "\n".join(lines)
