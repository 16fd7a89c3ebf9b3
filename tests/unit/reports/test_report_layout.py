"""Labels placed by the greedy rows never overlap; the ones that find no row are handed back."""
from hypothesis import given
from hypothesis import strategies as st

from pschaos.reports import layout

label = st.tuples(st.floats(0, 700), st.text(st.sampled_from("abc-/0123 mkilW"), min_size=1, max_size=30))


@given(st.lists(label, max_size=40), st.integers(1, 4))
def test_placed_labels_never_overlap_and_none_is_lost(labels, rows):
    placed, dropped = layout.rows_for(labels, 10.0, rows, 760.0)
    assert len(placed) + len(dropped) == len(labels)
    for i, a in enumerate(placed):
        assert 0 <= a.row < rows and a.x + a.width <= 760.0 + 1e-6 or a.width > 760
        for b in placed[i + 1:]:
            if a.row == b.row:
                assert a.x + a.width <= b.x or b.x + b.width <= a.x


def test_clip_keeps_a_label_within_its_width():
    long = "partition-primary-replicas-with-a-very-long-name"
    cut = layout.clip(long, 10.0, 120.0)
    assert cut.endswith("…") and layout.text_width(cut, 10.0) <= 120.0
    assert layout.clip("kill", 10.0, 120.0) == "kill"


def test_flow_wraps_at_the_right_edge():
    items = [f"shard-{i}/0" for i in range(12)]
    placed = layout.flow(items, 11.0, 50.0, 400.0, swatch=14)
    assert max(line for _, line, _ in placed) >= 1
    for x, line, text in placed:
        assert x + layout.text_width(text, 11.0) + 14 <= 400.0 + 1e-6 or x == 50.0


# DejaVu Sans' advance widths in em (units per em 2048), the face Debian renders sans-serif with
DEJAVU = {"!": 823, "#": 1716, "~": 1716, "+": 1716, "^": 1716, "&": 1597, "%": 1946, "@": 2048, "m": 1995, "W": 2025,
          "O": 1612, "0": 1303, "a": 1255, "(": 799, " ": 651, "—": 2048, "→": 1716, "∞": 1716, "×": 1716,
          "…": 2048}


def test_width_estimates_are_never_below_dejavu_sans():
    for c, units in DEJAVU.items():
        assert layout.text_width(c * 10, 10.0) >= 10 * 10 * units / 2048, c
    for c in "漢字データ" + "é✓":                                            # unknown or not ASCII: a full em
        assert layout.text_width(c * 10, 10.0) >= 100.0, c
