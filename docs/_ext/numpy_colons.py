"""A griffe extension for the API reference (mkdocs.yml): read dpbayes's numpydoc items.

dpbayes's docstrings write section items as ``name:`` (or ``a, b:``) on their own line with
the description indented below, and no type (the signature has the types). numpydoc
reads ``name : type``; griffe's parser takes ``name:`` as a name with an empty type. This
extension rewrites those item lines to ``name`` before parsing, in the Parameters,
Attributes, Returns, Raises and Other Parameters sections only; a plain paragraph after
the items (which numpydoc would read as one more item) becomes a Notes section.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SECTION = re.compile(r"^(Parameters|Other Parameters|Attributes|Returns|Yields|Raises)\s*$")
_UNDERLINE = re.compile(r"^-{3,}\s*$")
_ITEM = re.compile(r"^(?P<names>[A-Za-z_*][\w*]*(?:\s*,\s*[A-Za-z_*][\w*]*)*):\s*$")
_ITEMISH = re.compile(r"^[A-Za-z_*][\w*]*(\s*,\s*[A-Za-z_*][\w*]*)*\s*(:.*)?$")


def rewrite(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    in_section = False
    for i, line in enumerate(lines):
        out.append(line)
        if i + 1 < len(lines) and _SECTION.match(line) and _UNDERLINE.match(lines[i + 1]):
            in_section = True
            continue
        if i > 0 and _UNDERLINE.match(line) and not _SECTION.match(lines[i - 1]):
            in_section = False  # another section (Notes, Examples, ...)
        if in_section:
            m = _ITEM.match(line)
            if m:
                out[-1] = m.group("names")
            elif line[:1].strip() and i > 0 and not lines[i - 1].strip():
                if not _ITEMISH.match(line):  # a closing paragraph, not an item: Notes
                    out[-1:] = ["Notes", "-----", line]
                    in_section = False
    return "\n".join(out)


class NumpyColons(griffe.Extension):
    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
