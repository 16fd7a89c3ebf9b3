"""A run's report.html prints metrics in their units, and nothing from a report reaches the page unescaped."""
from pschaos.reports import html, markdown

REPORT = {"scenario": "s", "seed": "<i>1</i>", "backend": "sim", "verdict": "pass", "rerun": "pschaos run s.yaml",
          "faults": [], "checks": {"a|b\nc": {"valid": True, "details": {}}},
          "metrics": {"tiny": 1.2e-05, "huge": 1.23457e08, "acked_updates": 18891, "first_step_s": 0.166,
                      "final_loss": float("nan"), "sync_bytes": 75700, "failover_ms": {"p50": 480.0, "p99": "inf"},
                      "wall_s": float("inf")}}


def test_metrics_print_in_their_units_without_exponents():
    page = html.render(REPORT, [])
    table = page[page.index("<h2>Metrics</h2>"):]
    for bad in ("e-05", "e+08", "nan", "inf<", ">0.166<"):
        assert bad not in table, bad
    for good in (">0.000012<", ">123457000<", ">18,891<", ">166 ms<", ">75.7 kB<", "p50 480 ms, p99 ∞", ">–<"):
        assert good in table, good


def test_the_header_escapes_what_it_prints():
    page = html.render(REPORT, [])
    assert "<i>1</i>" not in page and "seed &lt;i&gt;1&lt;/i&gt;" in page


def test_a_check_name_cannot_break_the_summary_table():
    md = markdown.render(REPORT)
    assert "| a\\|b c | pass |" in md


def test_another_systems_events_draw_nothing_instead_of_crashing_the_page():
    """An adapted system's workload may write a train-step with no loss and samples without a
    role (the adapters engineer renamed theirs to dodge a KeyError): the page renders without them."""
    hist = [{"t": 0.5, "node": "worker-0", "type": "info", "f": "train-step", "value": {"worker": "worker-0"}},
            {"t": 0.6, "node": "harness", "type": "info", "f": "sample", "value": {"tick": 1, "node": "n0"}},
            {"t": 0.7, "node": "worker-0", "type": "info", "f": "train-step", "value": {"worker": "worker-0", "loss": 0.5}}]
    assert html.loss_series(hist) == {"worker-0": [(0.7, 0.5)]}
    assert html.lag_series(hist) == {}
    assert "<svg" in html.render({**REPORT, "seed": 1}, hist)
