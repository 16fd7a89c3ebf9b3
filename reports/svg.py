"""Our own inline-SVG charts: line charts with shaded windows, horizontal bars, lanes.

A report is one self-contained file with no network, no script and no plotting dependency.
Every chart takes round ticks and human units from `ticks`, puts its legend and labels where
`layout` finds room (never on top of each other), and carries a badge ("simulated, virtual
time") when the numbers come from the SimPy twin. Why our own code and not matplotlib: see the
README's section on reports.
"""
from __future__ import annotations

import math
from html import escape

from pschaos.reports import layout, ticks
from pschaos.reports.ticks import Formatter

W = 760
PAD_R = 16
TICK, LABEL = 10.0, 11.0
STACK = {"pass": "#16a34a", "fail": "#dc2626", "unknown": "#ca8a04"}     # verdict colours, stacked bars
COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"]


def scale(lo: float, hi: float, a: float, b: float):
    """The linear map from data [lo, hi] to pixels [a, b]."""
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def text(x: float, y: float, s: str, cls: str = "tick", anchor: str = "start", extra: str = "",
         tip: str = "") -> str:
    """A text label; `tip` (the full text of a clipped label) shows on hover."""
    title = f"<title>{escape(tip)}</title>" if tip else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}"{extra}>{escape(s)}{title}</text>'


def svg(title: str, h: float, body: list[str], cls: str = "plot") -> str:
    return (f'<svg class="{cls}" role="img" aria-label="{escape(title)}" viewBox="0 0 {W} {h:.0f}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>' + "".join(body) + "</svg>")


def fit_ticks(lo: float, hi: float, fmt: Formatter, px: float, target: int = 8) -> list[float]:
    """The densest round ticks (at most `target`) whose labels fit side by side in `px` pixels."""
    for n in range(target, 1, -1):
        ts = ticks.ticks_for(fmt, lo, hi, n)
        widest = max(layout.text_width(s, TICK) for s in ticks.axis(ts, fmt))
        if widest + 8 <= px / max(len(ts) - 1, 1):
            return ts
    return ticks.ticks_for(fmt, lo, hi, 2)


def header(left: float, top: float, ylabel: str, legend: list[str], badge: str,
           colors: list[str] | None = None) -> tuple[list[str], float]:
    """The line(s) above a plot: the y unit, the legend (colour swatches) and the badge at the right.

    Returns the SVG parts and the y where the header ends."""
    out = []
    right = W - PAD_R
    if badge:
        out.append(text(right, top + 11, badge, "badge", "end"))
        right -= layout.text_width(badge, LABEL) + 12
    items = ([ylabel] if ylabel else []) + legend
    lines = 0
    for x, line, item in layout.flow(items, LABEL, left, right, swatch=14):
        y = top + 11 + 15 * line
        lines = max(lines, line + 1)
        if ylabel and item is items[0] and x == left and line == 0:
            out.append(text(x, y, item, "label"))
            continue
        i = legend.index(item)
        color = (colors or COLORS)[i % len(colors or COLORS)]
        out.append(f'<rect x="{x:.1f}" y="{y - 6:.1f}" width="10" height="4" fill="{color}"/>')
        out.append(text(x + 14, y, item, "legend", extra=f' fill="{color}"'))
    return out, top + 15 * max(lines, 1 if badge else 0) + 4


def xaxis(ts: list[float], sx, y: float, fmt: Formatter, left: float, xlabel: str) -> list[str]:
    """The x axis: tick labels centred on their ticks but kept inside the SVG (the last one would
    hang past the right edge, where it is clipped); a label that would then touch its neighbour
    is left out (its grid line stays)."""
    out = [f'<line x1="{left}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" class="axis"/>']
    end = -1e9
    for t, s in zip(ts, ticks.axis(ts, fmt)):
        w = layout.text_width(s, TICK)
        x = min(max(sx(t), w / 2 + 1), W - 1 - w / 2)
        if x - w / 2 < end + 4:
            continue
        out.append(text(x, y + 14, s, anchor="middle"))
        end = x + w / 2
    if xlabel:
        out.append(text((W + left) / 2, y + 30, xlabel, "label", "middle"))
    return out


def yaxis(ts: list[float], sy, left: float, fmt: Formatter) -> list[str]:
    out = [f'<line x1="{left}" y1="{sy(ts[0]):.1f}" x2="{left}" y2="{sy(ts[-1]):.1f}" class="axis"/>']
    for t, s in zip(ts, ticks.axis(ts, fmt)):
        out.append(f'<line x1="{left}" x2="{W - PAD_R}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>')
        out.append(text(left - 6, sy(t) + 3.5, s, anchor="end"))
    return out


def _left_for(ts: list[float], fmt: Formatter) -> float:
    return 14 + max(layout.text_width(s, TICK) for s in ticks.axis(ts, fmt))


def lines(title: str, series: dict[str, list[tuple[float, float]]], windows: list[tuple[float, float, str]] = (),
          xlabel: str = "seconds", ylabel: str = "", yfmt: Formatter = ticks.plain,
          xfmt: Formatter = ticks.seconds, badge: str = "", x_end: float = 0.0) -> str:
    """Line chart; `windows` are shaded x-ranges (fault windows) labelled above the plot. The x
    axis runs from 0 to at least `x_end`, so that the time plots of one run line up. Points that
    are not finite (NaN, ±inf) are left out: SVG has no place for them."""
    series = {name: finite for name, s in sorted(series.items())
              if (finite := [(x, y) for x, y in s if math.isfinite(x) and math.isfinite(y)])}
    windows = [w for w in windows if math.isfinite(w[0]) and math.isfinite(w[1])]
    pts = [p for s in series.values() for p in s]
    if not pts:
        return empty(title, badge)
    x0 = min(min(x for x, _ in pts), min((a for a, _, _ in windows), default=1e18), 0.0)
    x1 = max(max(x for x, _ in pts), max((b for _, b, _ in windows), default=-1e18), x_end)
    yt = ticks.ticks_for(yfmt, min(0.0, min(y for _, y in pts)), max(y for _, y in pts) or 1.0, 5)
    left = _left_for(yt, yfmt)
    xt = fit_ticks(x0, x1, xfmt, W - PAD_R - left)
    sx = scale(xt[0], xt[-1], left, W - PAD_R)
    body, top = header(left, 2, ylabel, list(series), badge)
    placed, dropped = layout.rows_for([(sx(a) + 2, label) for a, _, label in windows], TICK, 3, W - PAD_R)
    rows = max((p.row + 1 for p in placed), default=0)
    body += [text(p.x, top + 10 + 12 * p.row, p.text, "flabel") for p in placed]
    top += 12 * rows + (4 if rows else 0)
    plot_h = 170
    sy = scale(yt[0], yt[-1], top + plot_h, top)
    body += yaxis(yt, sy, left, yfmt)
    for a, b, label in windows:
        body.append(f'<rect x="{sx(a):.1f}" y="{top:.1f}" width="{max(sx(b) - sx(a), 2):.1f}" '
                    f'height="{plot_h}" class="fault"><title>{escape(label)}</title></rect>')
    for i, (name, s) in enumerate(series.items()):
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(s))
        body.append(f'<polyline points="{path}" fill="none" stroke="{COLORS[i % len(COLORS)]}" '
                    f'stroke-width="1.5"><title>{escape(name)}</title></polyline>')
    note = f" · {len(dropped)} more fault label(s) in the timeline" if dropped else ""
    body += xaxis(xt, sx, top + plot_h, xfmt, left, xlabel + note)
    return svg(title, top + plot_h + 36, body)


def hbars(title: str, rows: list[tuple[str, dict[str, float], str]], xfmt: Formatter = ticks.plain,
          stacked: bool = False, domain: tuple[float, float] | None = None, xlabel: str = "",
          badge: str = "", label_w: float = 190, note_w: float = 120) -> str:
    """Horizontal bars, one row per category: the label at the left (clipped, never rotated or
    overlapping), the bars, and a note at the right (`75% of 4 runs`). `stacked` stacks a row's
    values (pass / fail / unknown); otherwise each value is its own thin bar (sent / changed)."""
    rows = [(label, {k: v for k, v in vals.items() if math.isfinite(v)}, note) for label, vals, note in rows]
    if not rows:
        return empty(title, badge)
    keys = list(dict.fromkeys(k for _, vals, _ in rows for k in vals))
    top_v = max((sum(v.values()) if stacked else max(v.values(), default=0.0)) for _, v, _ in rows)
    lo, hi = domain or (0.0, top_v or 1.0)
    left, right = label_w + 8, W - PAD_R - (note_w if any(n for _, _, n in rows) else 0)
    xt = fit_ticks(lo, hi, xfmt, right - left, 6) if domain is None else ticks.nice_ticks(lo, hi, 4)
    sx = scale(xt[0], xt[-1], left, right)
    colors = [STACK.get(k, COLORS[i % len(COLORS)]) if stacked else COLORS[i % len(COLORS)] for i, k in enumerate(keys)]
    body, top = header(left, 2, "", keys if len(keys) > 1 else [], badge, colors)
    row_h = 20 if stacked or len(keys) == 1 else 8 + 7 * len(keys)
    for t in xt:
        body.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{top}" y2="{top + row_h * len(rows)}" class="grid"/>')
    for ri, (label, vals, note) in enumerate(rows):
        y = top + row_h * ri
        body.append(text(label_w, y + row_h / 2 + 3.5, layout.clip(label, TICK, label_w - 4), anchor="end", tip=label))
        acc = lo
        for ki, k in enumerate(keys):
            v = vals.get(k)
            if v is None:
                continue
            color = colors[ki]
            if stacked:
                x, w, by, bh = sx(acc), sx(acc + v) - sx(acc), y + 3, row_h - 6
                acc += v
            else:
                x, w, by, bh = sx(lo), sx(v) - sx(lo), y + 4 + 7 * ki, 6 if len(keys) > 1 else row_h - 8
            body.append(f'<rect x="{x:.1f}" y="{by:.1f}" width="{max(w, 0.0):.1f}" height="{bh:.1f}" fill="{color}">'
                        f'<title>{escape(label)} · {escape(k)}: {escape(xfmt(v))}</title></rect>')
        if note:
            body.append(text(right + 6, y + row_h / 2 + 3.5, layout.clip(note, TICK, note_w - 8)))
    body += xaxis(xt, sx, top + row_h * len(rows), xfmt, left, xlabel)
    return svg(title, top + row_h * len(rows) + (36 if xlabel else 22), body)


def lanes(title: str, rows: dict[str, list[tuple[float, float, str]]], end: float, badge: str = "",
          xlabel: str = "seconds") -> str:
    """One lane per key; each (start, stop, label) a bar, labelled inside when the label fits."""
    if not rows:
        return empty(title, badge)
    left = 80
    xt = fit_ticks(0.0, end or 1.0, ticks.seconds, W - PAD_R - left)
    sx = scale(xt[0], xt[-1], left, W - PAD_R)
    body, top = header(left, 2, "", [], badge)
    for i, (lane, bars) in enumerate(sorted(rows.items())):
        y = top + 30 * i
        body.append(text(left - 6, y + 19, lane, anchor="end"))
        for j, (a, b, label) in enumerate(bars):
            w = max(sx(b) - sx(a), 2)
            body.append(f'<rect x="{sx(a):.1f}" y="{y + 5}" width="{w:.1f}" height="22" fill="{COLORS[j % len(COLORS)]}" '
                        f'opacity="0.85"><title>{escape(label)}</title></rect>')
            if layout.text_width(label, TICK) + 8 <= w:
                body.append(text(sx(a) + 4, y + 20, label, "barlabel"))
    body += xaxis(xt, sx, top + 30 * len(rows) + 2, ticks.seconds, left, xlabel)
    return svg(title, top + 30 * len(rows) + 38, body)


def empty(title: str, badge: str = "") -> str:
    body = [text(W / 2, 34, "nothing to plot in this run", "label", "middle")]
    if badge:
        body.append(text(W - PAD_R, 14, badge, "badge", "end"))
    return svg(title, 60, body, "plot empty")
