"""Where text goes so that no two labels overlap: width estimates and greedy rows.

SVG has no text layout, and the page runs no script to measure text, so labels are placed from
an estimate of their width. The estimate is deliberately generous (wider than any common sans
face renders these characters at that size); the browser test measures the real boxes and fails
on any overlap, so an estimate that turns out too small shows up there, not on a reader's screen.
"""
from __future__ import annotations

from dataclasses import dataclass

# em widths a little above DejaVu Sans' (Debian's default sans), the widest common face here:
# `>` and `=` are 0.84 em there, capitals up to 0.79, digits 0.64, `(` 0.39
WIDE = set("mwMW@%<>=→∞…")
NARROW = set("ilj.,:;'|!()[]/ ")


def text_width(text: str, size: float) -> float:
    """Estimated rendered width in px of `text` at font size `size` px."""
    units = sum(0.98 if c in WIDE else 0.40 if c in NARROW else 0.80 if c.isupper() else 0.645 for c in text)
    return units * size + 2


def clip(text: str, size: float, width: float) -> str:
    """`text` cut with an ellipsis so that it fits `width` px (the full text goes in a <title>)."""
    if text_width(text, size) <= width:
        return text
    while text and text_width(text + "…", size) > width:
        text = text[:-1]
    return text + "…"


@dataclass(frozen=True)
class Placed:
    """A label given a row: its left edge (px), width (px) and row index."""
    x: float
    width: float
    row: int
    text: str


def rows_for(labels: list[tuple[float, str]], size: float, max_rows: int, right: float,
             gap: float = 6.0) -> tuple[list[Placed], list[str]]:
    """Give each (left x, text) label the first row where it overlaps no earlier label.

    A label that would run past `right` is moved left to end there. Labels that find no row
    among `max_rows` are returned apart (the caller lists them elsewhere or keeps them in a
    tooltip), never drawn on top of another."""
    ends: list[list[tuple[float, float]]] = [[] for _ in range(max_rows)]
    placed, dropped = [], []
    for x, text in sorted(labels, key=lambda p: p[0]):
        w = text_width(text, size)
        x = max(0.0, min(x, right - w))
        for row, spans in enumerate(ends):
            if all(x + w + gap <= a or x >= b + gap for a, b in spans):
                spans.append((x, x + w))
                placed.append(Placed(x, w, row, text))
                break
        else:
            dropped.append(text)
    return placed, dropped


def flow(items: list[str], size: float, left: float, right: float, gap: float = 14.0,
         swatch: float = 0.0) -> list[tuple[float, int, str]]:
    """Lay legend entries left to right, wrapping to a new line at `right`: (x, line, text)."""
    out, x, line = [], left, 0
    for text in items:
        w = text_width(text, size) + swatch
        if x > left and x + w > right:
            x, line = left, line + 1
        out.append((x, line, text))
        x += w + gap
    return out
