"""Distributions across runs, one row per category on a shared axis: ECDFs and dot strips.

With sixteen scenarios, one ECDF each stacked on a shared x axis reads better than sixteen
histograms (few failovers per scenario make histograms all gaps) or one plot with sixteen
crossing lines. p50 and p99 are marked on each row and printed in the row's note, so no value
label sits inside the plot where it could collide with another.
"""
from __future__ import annotations

import math
from html import escape

from pschaos.reports import layout, ticks
from pschaos.reports.svg import COLORS, PAD_R, TICK, W, scale, empty, fit_ticks, header, svg, text, xaxis

Row = tuple[str, list[float], dict[str, float], str]     # label, values, marks (p50/p99), note


def rows(title: str, data: list[Row], kind: str = "ecdf", xfmt: ticks.Formatter = ticks.plain,
         xlabel: str = "", badge: str = "", label_w: float = 170, note_w: float = 215) -> str:
    """`kind` "ecdf": a step line per row from 0 to 1 (its values' cumulative share) with the marks
    (p50, p99) as vertical ticks; "dots": a dot per value (red above zero: lost acks), where the
    marks name each value (`{"seed 3": 12}`) for its tooltip."""
    finite = [v for _, vs, _, _ in data for v in vs if math.isfinite(v)]
    if not data or not finite and kind == "ecdf":
        return empty(title, badge)
    left, right = label_w + 8, W - PAD_R - note_w
    xt = fit_ticks(0.0, max(finite, default=0.0) or 1.0, xfmt, right - left, 6)
    sx = scale(xt[0], xt[-1], left, right)
    legend = [k for k in ("p50", "p99")] if kind == "ecdf" else []
    body, top = header(left, 2, "", legend, badge)
    row_h = 30 if kind == "ecdf" else 18
    for t in xt:
        body.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{top}" y2="{top + row_h * len(data)}" class="grid"/>')
    for ri, (label, values, marks, note) in enumerate(data):
        y = top + row_h * ri
        if ri % 2:
            body.append(f'<rect x="{left}" y="{y}" width="{right - left}" height="{row_h}" class="stripe"/>')
        body.append(text(label_w, y + row_h / 2 + 3.5, layout.clip(label, TICK, label_w - 4), anchor="end", tip=label))
        body.append(text(right + 6, y + row_h / 2 + 3.5, layout.clip(note, TICK, note_w - 8), tip=note))
        body += (_ecdf if kind == "ecdf" else _dots)(values, marks, sx, y, row_h, label, xfmt)
    body += xaxis(xt, sx, top + row_h * len(data), xfmt, left, xlabel)
    return svg(title, top + row_h * len(data) + (36 if xlabel else 22), body)


def _ecdf(values, marks, sx, y, h, label, xfmt) -> list[str]:
    vs = sorted(v for v in values if math.isfinite(v))
    if not vs:
        return []
    lo, hi = y + h - 4, y + 4
    sy = scale(0.0, 1.0, lo, hi)
    pts = [(sx(vs[0]), lo)]
    for i, v in enumerate(vs):
        pts += [(sx(v), sy(i / len(values))), (sx(v), sy((i + 1) / len(values)))]
    pts.append((sx(vs[-1]) + 6, sy(len(vs) / len(values))))
    out = [f'<polyline points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}" fill="none" stroke="#334155" '
           f'stroke-width="1.3"><title>{escape(label)}: {len(vs)} value(s)</title></polyline>']
    for i, (name, v) in enumerate(marks.items()):
        if v is not None and math.isfinite(v):
            dash = ' stroke-dasharray="3 2"' if i == 0 else ""
            out.append(f'<line x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="{y + 2}" y2="{y + h - 2}" stroke="{COLORS[i]}" '
                       f'stroke-width="2"{dash}><title>{escape(label)} {name} {escape(xfmt(v))}</title></line>')
    return out


def _dots(values, marks, sx, y, h, label, xfmt) -> list[str]:
    """A dot per value; one that is no number (NaN) has no place on the axis and is left out."""
    return [f'<circle cx="{sx(v):.1f}" cy="{y + h / 2:.1f}" r="3.5" fill="{"#dc2626" if v > 0 else "#16a34a"}" '
            f'fill-opacity="0.7"><title>{escape(label)} {escape(name)}: {escape(xfmt(v))}</title></circle>'
            for name, v in zip(marks, values) if math.isfinite(v)]
