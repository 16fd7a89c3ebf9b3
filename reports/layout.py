"""Where text goes so that no two labels overlap: width estimates and greedy rows.

SVG has no text layout, and the page runs no script to measure text, so labels are placed from
an estimate of their width. The estimate is at or above DejaVu Sans' advance widths (Debian's
default sans, and the widest common one) for every printable ASCII character, and a full em for
anything else (dashes, arrows, symbols, CJK: whatever face the browser falls back to draws them
at most that wide); other faces may render narrower, never meant to be wider. The browser test
measures the real boxes and fails on any overlap, so an estimate that turns out too small shows
up there, not on a reader's screen.
"""
from __future__ import annotations

from dataclasses import dataclass

# em widths at or a little above DejaVu Sans' advances (units of 2048 per em): `m` 0.974, `@`
# 1.0, `W` 0.989, `%` 0.95; `#` `+` `<` `=` `>` `^` `~` 0.838, `&` 0.78; capitals up to 0.787;
# digits and lower case up to 0.636; `(` `[` 0.39, `!` 0.402, `i` `l` `j` 0.278, space 0.318
WIDE = set("mwMW@%")
SYMBOL = set("#+<=>^~&")
NARROW = set("ilj.,:;'|!()[]/\\` ")
UNKNOWN = 1.0           # anything not ASCII: an em dash, an arrow, a CJK character is up to a full em


def char_width(c: str) -> float:
    """The estimated advance of one character, in em."""
    if not c.isascii():
        return UNKNOWN
    if c in WIDE:
        return 1.0
    if c in SYMBOL:
        return 0.86
    if c in NARROW:
        return 0.41
    return 0.80 if c.isupper() else 0.645


def text_width(text: str, size: float) -> float:
    """Estimated rendered width in px of `text` at font size `size` px."""
    return sum(char_width(c) for c in text) * size + 2


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
