"""griffe extension: Sphinx roles in kgroup's docstrings read as code on the site.

kgroup's docstrings name other objects with Sphinx roles
(``:class:`~kgroup.config.ConsumerConfig```), which a reader of the source
and ``help()`` understands; mkdocstrings renders Markdown and would show the
role's markup as text. The site shows the name as code instead: the last
component with ``~``, the whole path without, as Sphinx does.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const):`(~?)([^`]+)`")


def _as_code(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_as_code, obj.docstring.value)
