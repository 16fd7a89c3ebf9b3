"""The timeline drawn: lanes against time, zoomable with plain CSS (no script, no network).

Horizontal positions are percentages of the SVG's width and mark widths are pixels, so the
page zooms by widening one SVG (radio buttons and `:checked` rules) while text keeps its size
and marks stay thin. Text does not scale with the zoom, so each zoom level has its own fault
labels (laid out for that width: more of them find room as the plot widens) and its own round
ticks, shown only at that level; the "simulated" badge has a row of its own, where no zoomed
label can reach it.
"""
from __future__ import annotations

import math
from html import escape

from pschaos.reports import layout, ticks
from pschaos.reports.evidence import Moment
from pschaos.reports.svg import TICK, fit_ticks, text
from pschaos.reports.timeline import Timeline

PW = 690                # plot width in px at 1x
NAMES_W = 96            # the lane-name column
LANE_H = 26
ZOOMS = (1, 2, 4, 8)
BINS = 1400             # marks per lane and outcome at most: one per bin that has any
MAX_LABEL_ROWS = 4
ROW = {"ok": 0, "duplicate": 1, "info": 2, "fail": 3}     # a sub-row per outcome, so none hides another

CSS = """
.timeline{margin:6px 0}.timeline input{position:absolute;opacity:0;width:0;height:0;margin:0;pointer-events:none}
.timeline input:checked+label{background:#e0e7ff;border-color:#6366f1}
.timeline label.zoom{display:inline-block;border:1px solid #ccc;border-radius:3px;padding:0 6px;margin-right:4px;
 font-size:12px;cursor:pointer}
.tlbody{display:flex;border:1px solid #eee}.tlscroll{overflow-x:auto;flex:1}
svg.tllanes{flex:none;width:%(names)dpx}svg.timeline{display:block;width:%(pw)dpx}
.tl-ok{fill:#16a34a}.tl-duplicate{fill:#9333ea}.tl-info{fill:#ca8a04}.tl-fail{fill:#dc2626}
.tl-ev{fill:#475569}.tl-primary{fill:#dbeafe}.tl-down{fill:#e5e7eb}.tl-stripe{fill:#fafafa}
.tl-plabel{font-size:9px;fill:#1e40af}.zt,.zl{display:none}.tlaxis{font-size:12px;color:#555;margin:2px 0}
.moment{scroll-margin:120px 300px;stroke:#7f1d1d;stroke-width:1;stroke-dasharray:3 2}.moment:target{stroke:#dc2626;stroke-width:4;stroke-dasharray:none}
.tlkey span{display:inline-block;margin-right:12px;font-size:12px}.tlkey i{display:inline-block;width:10px;height:10px;
 margin-right:4px;vertical-align:-1px}
""" % {"names": NAMES_W, "pw": PW} + "".join(
    f"#tlz{z}:checked~.tlbody svg.timeline{{width:{PW * z}px}}#tlz{z}:checked~.tlbody .zt{z}{{display:inline}}"
    f"#tlz{z}:checked~.tlbody .zl{z}{{display:inline}}"
    for z in ZOOMS)

KEY = [("#16a34a", "ok"), ("#9333ea", "duplicate (retry of a sent request)"), ("#ca8a04", "info (indeterminate)"),
       ("#dc2626", "fail"), ("#475569", "node event"), ("#dbeafe", "primary (epoch)"), ("#e5e7eb", "down (fault)"),
       ("#fecaca", "fault window")]


def _x(t: float, span: float) -> str:
    """An x position as a share of the SVG's width, so that zooming (widening the SVG) moves it."""
    return f"{100 * t / span:.3f}%"


def _ticks(span: float, top: float, height: float, xfmt: ticks.Formatter) -> list[str]:
    out = []
    for z in ZOOMS:
        ts = [t for t in fit_ticks(0.0, span, xfmt, PW * z - 4, 8 * z) if t <= span + 1e-9]
        for t, label in zip(ts, ticks.axis(ts, xfmt)):
            anchor = "start" if t == 0 else "end" if abs(t - span) < 1e-9 else "middle"
            out.append(f'<g class="zt zt{z}"><line x1="{_x(t, span)}" x2="{_x(t, span)}" y1="{top + 4}" '
                       f'y2="{top + height}" class="grid"/>'
                       f'<text x="{_x(t, span)}" y="{top + 11}" class="tick" text-anchor="{anchor}">'
                       f'{escape(label)}</text></g>')
    return out


def _marks(lane, span: float, y: float) -> list[str]:
    bins: dict[tuple[int, str], list] = {}
    for t, outcome, what in lane.marks:
        if not math.isfinite(t):
            continue
        b = min(int(t / span * BINS), BINS - 1)
        bins.setdefault((b, outcome), []).append((t, what))
    out = []
    for (b, outcome), items in sorted(bins.items()):
        t0 = b * span / BINS
        first, last = items[0][0], items[-1][0]
        when = f"at {ticks.seconds(first)}" if len(items) == 1 else \
            f"from {ticks.seconds(first)} to {ticks.seconds(last)}"
        tip = f"{len(items)} × {outcome} {when}: e.g. {items[0][1]} at {ticks.seconds(first)}"
        out.append(f'<rect x="{_x(t0, span)}" y="{y + 5 + 4 * ROW[outcome]}" width="2" height="4" '
                   f'class="tl-{outcome}"><title>{escape(tip)}</title></rect>')
    return out


def _fault_labels(tl: Timeline, span: float, top: float) -> tuple[list[str], int, int]:
    """Each zoom level's fault labels, laid out for that level's width (shown only at it): the
    SVG parts, the most rows any level takes, and how many labels found no row at 1×."""
    out, rows, dropped_1x = [], 0, 0
    for z in ZOOMS:
        width = PW * z
        placed, dropped = layout.rows_for([(width * a / span + 2, label) for a, _, label in tl.faults],
                                          TICK, MAX_LABEL_ROWS, width)
        if z == 1:
            dropped_1x = len(dropped)
        rows = max([rows] + [p.row + 1 for p in placed])
        out += [f'<text x="{100 * p.x / width:.3f}%" y="{top + 10 + 12 * p.row}" class="flabel zl zl{z}">'
                f'{escape(p.text)}</text>' for p in placed]
    return out, rows, dropped_1x


def render(tl: Timeline, moments: list[Moment] = (), badge: str = "", xfmt: ticks.Formatter = ticks.seconds,
           xlabel: str = "seconds since the run started") -> str:
    """The timeline section: zoom buttons, a key, the lane names and the zoomable SVG."""
    span = ticks.ticks_for(xfmt, 0.0, tl.end or 1.0, 8)[-1]
    body = [text(PW - 2, 11, badge, "badge", "end")] if badge else []
    labels, rows, dropped = _fault_labels(tl, span, 14 if badge else 0)
    body += labels
    band = (14 if badge else 0) + 12 * rows
    top = band + 16                                  # the badge, fault labels, then the tick row
    height = top + LANE_H * len(tl.lanes) + 4
    names = []
    for i, lane in enumerate(tl.lanes):
        y = top + LANE_H * i
        if i % 2:
            body.append(f'<rect x="0" y="{y}" width="100%" height="{LANE_H}" class="tl-stripe"/>')
        names.append(text(NAMES_W - 6, y + 17, layout.clip(lane.name, TICK, NAMES_W - 8), anchor="end", tip=lane.name))
        for cls, bands in (("tl-down", lane.down), ("tl-primary", lane.primary)):
            for a, b, label in bands:
                body.append(f'<rect x="{_x(a, span)}" y="{y + 1}" width="{_x(max(b - a, 0), span)}" '
                            f'height="{LANE_H - 2}" class="{cls}"><title>{escape(label)}</title></rect>')
                if cls == "tl-primary" and layout.text_width(label, 9) + 4 <= PW * (b - a) / span:
                    body.append(f'<text x="{_x(a, span)}" y="{y + LANE_H - 3}" dx="2" class="tl-plabel">'
                                f'{escape(label)}</text>')
    body += _ticks(span, band, height - band, xfmt)
    for a, b, label in tl.faults:
        body.append(f'<rect x="{_x(a, span)}" y="{top}" width="{_x(max(b - a, 0), span)}" '
                    f'height="{height - top}" class="fault"><title>{escape(label)}</title></rect>')
    for i, lane in enumerate(tl.lanes):
        y = top + LANE_H * i
        body += [f'<rect x="{_x(t, span)}" y="{y + 1}" width="2" height="5" class="tl-ev">'
                 f'<title>{escape(what)} at {ticks.seconds(t)}</title></rect>' for t, what in lane.events
                 if math.isfinite(t)]
        body += _marks(lane, span, y + 4)
    for m in moments:
        body.append(f'<line id="{m.id}" x1="{_x(m.t, span)}" x2="{_x(m.t, span)}" y1="{top}" y2="{height}" '
                    f'class="moment"><title>{escape(m.label)} at {ticks.seconds(m.t)}</title></line>')
    zoom = "".join(f'<input type="radio" name="tlzoom" id="tlz{z}"{" checked" if z == 1 else ""}>'
                   f'<label class="zoom" for="tlz{z}">{z}×</label>' for z in ZOOMS)
    key = "".join(f'<span><i style="background:{c}"></i>{escape(n)}</span>' for c, n in KEY)
    more = f"<p>{dropped} more fault label(s) not drawn at 1×: zoom in, or hover the shading.</p>" if dropped else ""
    return (f'<div class="timeline">{zoom}<div class="tlkey">{key}</div><p class="tlaxis">time axis: {escape(xlabel)}</p>'
            f'<div class="tlbody"><svg class="tllanes" viewBox="0 0 {NAMES_W} {height}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(names)}</svg><div class="tlscroll">'
            f'<svg class="plot timeline" role="img" aria-label="timeline" width="{PW}" height="{height}" '
            f'style="height:{height}px" '
            f'xmlns="http://www.w3.org/2000/svg"><title>timeline: lanes per node and worker</title>'
            f'{"".join(body)}</svg></div></div>{more}</div>')
