"""What a reader's browser sees on a report page, measured in the page with JavaScript.

Shared by the report rendering tests: a text label is any SVG <text> the browser lays out with
a non-empty box (a tick set hidden at another zoom level has none); two labels overlap when
their boxes intersect by more than half a pixel each way.
"""
from __future__ import annotations

OVERLAPS_JS = """
const boxes = [];
for (const el of document.querySelectorAll('svg text')) {
  const r = el.getBoundingClientRect();
  if (r.width > 0 && r.height > 0) {
    const own = el.firstChild && el.firstChild.nodeType === 3 ? el.firstChild.nodeValue : el.textContent;
    boxes.push([r.left, r.top, r.right, r.bottom, own]);
  }
}
const hits = [];
for (let i = 0; i < boxes.length; i++) {
  for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    const w = Math.min(a[2], b[2]) - Math.max(a[0], b[0]), h = Math.min(a[3], b[3]) - Math.max(a[1], b[1]);
    if (w > 0.5 && h > 0.5) hits.push([a[4], b[4], Math.round(w * 10) / 10, Math.round(h * 10) / 10]);
  }
}
return {labels: boxes.length, overlaps: hits};
"""


def text_overlaps(driver) -> dict:
    """{"labels": how many text labels are laid out, "overlaps": [[text, text, dx, dy], ...]}."""
    return driver.execute_script(OVERLAPS_JS)
