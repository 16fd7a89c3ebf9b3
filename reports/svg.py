"""Small inline-SVG charts, so that a report is one self-contained file with no network and no
plotting dependency: line charts with shaded windows, lane timelines, bar charts."""
from __future__ import annotations

from html import escape

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 760, 240, 56, 16, 16, 36
COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"]


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _frame(title: str, body: list[str], xlabel: str, ylabel: str, xs: tuple[float, float],
           ys: tuple[float, float], h: int = H) -> str:
    sx = _scale(xs[0], xs[1], PAD_L, W - PAD_R)
    sy = _scale(ys[0], ys[1], h - PAD_B, PAD_T)
    ticks = []
    for i in range(5):
        xv = xs[0] + (xs[1] - xs[0]) * i / 4
        yv = ys[0] + (ys[1] - ys[0]) * i / 4
        ticks.append(f'<text x="{sx(xv):.1f}" y="{h - PAD_B + 16}" class="tick" text-anchor="middle">{xv:.3g}</text>')
        ticks.append(f'<text x="{PAD_L - 6}" y="{sy(yv) + 4:.1f}" class="tick" text-anchor="end">{yv:.3g}</text>')
        ticks.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{sy(yv):.1f}" y2="{sy(yv):.1f}" class="grid"/>')
    return (f'<svg class="plot" role="img" aria-label="{escape(title)}" viewBox="0 0 {W} {h}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
            + "".join(ticks) + "".join(body)
            + f'<line x1="{PAD_L}" y1="{h - PAD_B}" x2="{W - PAD_R}" y2="{h - PAD_B}" class="axis"/>'
            + f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{h - PAD_B}" class="axis"/>'
            + f'<text x="{(W + PAD_L) / 2}" y="{h - 4}" class="label" text-anchor="middle">{escape(xlabel)}</text>'
            + f'<text x="12" y="{h / 2}" class="label" transform="rotate(-90 12 {h / 2})" '
              f'text-anchor="middle">{escape(ylabel)}</text></svg>')


def lines(title: str, series: dict[str, list[tuple[float, float]]], windows: list[tuple[float, float, str]] = (),
          xlabel: str = "seconds", ylabel: str = "", log: bool = False) -> str:
    """Line chart; `windows` are shaded, labelled x-ranges (fault windows)."""
    pts = [p for s in series.values() for p in s]
    if not pts:
        return empty(title)
    x0 = min(min(x for x, _ in pts), min((a for a, _, _ in windows), default=1e18))
    x1 = max(max(x for x, _ in pts), max((b for _, b, _ in windows), default=-1e18))
    y0, y1 = min(0.0, min(y for _, y in pts)), max(y for _, y in pts) * 1.05 or 1.0
    sx, sy = _scale(x0, x1, PAD_L, W - PAD_R), _scale(y0, y1, H - PAD_B, PAD_T)
    body = []
    for i, (a, b, label) in enumerate(windows):
        body.append(f'<rect x="{sx(a):.1f}" y="{PAD_T}" width="{max(sx(b) - sx(a), 2):.1f}" '
                    f'height="{H - PAD_B - PAD_T}" class="fault"><title>{escape(label)}</title></rect>')
        body.append(f'<text x="{sx(a) + 3:.1f}" y="{PAD_T + 12 + 12 * (i % 3)}" class="flabel">{escape(label)}</text>')
    for i, (name, s) in enumerate(series.items()):
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(s))
        color = COLORS[i % len(COLORS)]
        body.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        body.append(f'<text x="{W - PAD_R - 4}" y="{PAD_T + 12 + 13 * i}" class="legend" text-anchor="end" '
                    f'fill="{color}">{escape(name)}</text>')
    return _frame(title, body, xlabel, ylabel, (x0, x1), (y0, y1))


def lanes(title: str, rows: dict[str, list[tuple[float, float, str]]], end: float) -> str:
    """One lane per key; each (start, stop, label) a labelled bar (who was primary when)."""
    if not rows:
        return empty(title)
    h = PAD_T + PAD_B + 34 * len(rows)
    sx = _scale(0, end or 1, PAD_L + 40, W - PAD_R)
    body = []
    for i, (lane, bars) in enumerate(sorted(rows.items())):
        y = PAD_T + 34 * i
        body.append(f'<text x="{PAD_L + 34}" y="{y + 20}" class="tick" text-anchor="end">{escape(lane)}</text>')
        for j, (a, b, label) in enumerate(bars):
            color = COLORS[j % len(COLORS)]
            body.append(f'<rect x="{sx(a):.1f}" y="{y + 6}" width="{max(sx(b) - sx(a), 2):.1f}" height="22" '
                        f'fill="{color}" opacity="0.8"><title>{escape(label)}</title></rect>')
            body.append(f'<text x="{sx(a) + 4:.1f}" y="{y + 21}" class="barlabel">{escape(label)}</text>')
    return (f'<svg class="plot" role="img" aria-label="{escape(title)}" viewBox="0 0 {W} {h}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>' + "".join(body)
            + f'<text x="{(W + PAD_L) / 2}" y="{h - 6}" class="label" text-anchor="middle">seconds (0 to {end:.1f})</text>'
              '</svg>')


def bars(title: str, items: list[tuple[str, dict[str, float]]], ylabel: str = "") -> str:
    """Grouped bars: each item a group of named values."""
    if not items:
        return empty(title)
    keys = list(dict.fromkeys(k for _, vals in items for k in vals))
    top = max((v for _, vals in items for v in vals.values()), default=1.0) * 1.1 or 1.0
    sy = _scale(0, top, H - PAD_B, PAD_T)
    group = (W - PAD_L - PAD_R) / len(items)
    bw = group * 0.8 / max(len(keys), 1)
    body = []
    for gi, (label, vals) in enumerate(items):
        gx = PAD_L + gi * group + group * 0.1
        for ki, k in enumerate(keys):
            v = vals.get(k, 0.0)
            body.append(f'<rect x="{gx + ki * bw:.1f}" y="{sy(v):.1f}" width="{bw - 2:.1f}" '
                        f'height="{H - PAD_B - sy(v):.1f}" fill="{COLORS[ki % len(COLORS)]}">'
                        f'<title>{escape(label)} {escape(k)}: {v:g}</title></rect>')
        body.append(f'<text x="{gx + group * 0.4:.1f}" y="{H - PAD_B + 14}" class="tick" '
                    f'text-anchor="middle">{escape(label[:18])}</text>')
    for ki, k in enumerate(keys):
        body.append(f'<text x="{W - PAD_R - 4}" y="{PAD_T + 12 + 13 * ki}" class="legend" text-anchor="end" '
                    f'fill="{COLORS[ki % len(COLORS)]}">{escape(k)}</text>')
    return (f'<svg class="plot" role="img" aria-label="{escape(title)}" viewBox="0 0 {W} {H}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>' + "".join(body)
            + f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}" class="axis"/>'
            + f'<text x="{PAD_L - 6}" y="{PAD_T + 4}" class="tick" text-anchor="end">{top:.3g}</text>'
            + f'<text x="12" y="{H / 2}" class="label" transform="rotate(-90 12 {H / 2})" '
              f'text-anchor="middle">{escape(ylabel)}</text></svg>')


def empty(title: str) -> str:
    return (f'<svg class="plot empty" role="img" aria-label="{escape(title)}" viewBox="0 0 {W} 60" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
            f'<text x="{W / 2}" y="34" class="label" text-anchor="middle">nothing to plot in this run</text></svg>')
