"""Reports as people see them, in headless Chromium: a run's report.html and aggregates.

Each page renders with no SEVERE console entry, shows every plot, and no two text labels'
boxes overlap (measured in the page, `page_checks`). A simulated run's plots say "simulated";
the timeline zooms with CSS alone, and a failing check's evidence links to its moment there.
Full-page screenshots are kept in out/screenshots/ as test artifacts.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from harness.tools import REPO

from .page_checks import text_overlaps

SHOTS = REPO / "out" / "screenshots"
SCENARIO = """name: render-me
cluster: {shards: 2, copies: 2, workers: 1, model: mlp}
workload: {steps: 120}
faults:
  - at: {step: 40}
    kind: kill
    target: primary(shard=0)
    until: {step: 80}
expect:
  checks: [no-lost-acks, single-primary, exactly-once, replicas-match]
"""
# the library's quickest scenarios on the twin (about 2 s each), and one with seven faults whose
# labels crowd the time axes; the docker-only ones come out unknown, which an aggregate must show too
SIM_SCENARIOS = ["kill-primary", "cpu-throttle-primary", "disk-full-primary", "kill-mid-protocol",
                 "memory-limit-primary", "etcd-outage-failover", "partition-worker-shard", "pause-primary",
                 "kill-restart-worker", "all-copies-lost", "latency-primary-replica", "scale-out-workers",
                 "bandwidth-worker-shard", "loss-20-worker-links", "short-cut-primary", "kill-replica",
                 "nemesis-partitions"]
RUN_PLOTS = 7           # timeline, loss, primaries, failover, lag, catch-up bytes, throughput
AGGREGATE_PLOTS = 4     # pass rate per scenario and per fault kind, failover ECDFs, lost acks per seed


@pytest.fixture(scope="module")
def browser():
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("chromium and chromium-driver are needed (apt-get install chromium chromium-driver, or make install)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--window-size=900,2600"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def run_out(tmp_path_factory):
    d = tmp_path_factory.mktemp("render")
    (d / "render-me.yaml").write_text(SCENARIO)
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(d / "render-me.yaml"), "--seed", "3",
                        "--out", str(d / "run"), "--quiet"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    return d


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory):
    """Seventeen library scenarios on the twin, one process, seed 1: DIR/<scenario>/report.json."""
    d = tmp_path_factory.mktemp("sim-runs")
    paths = [str(REPO / "scenarios" / f"{n}.yaml") for n in SIM_SCENARIOS]
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", *paths, "--backend", "sim", "--seed", "1",
                        "--out", str(d), "--quiet"], capture_output=True, text=True, timeout=900, cwd=REPO)
    missing = [n for n in SIM_SCENARIOS if not (d / n / "report.html").exists()]
    assert p.returncode != 2 and not missing, (missing, p.stdout[-3000:], p.stderr[-3000:])
    return d


def look(browser, page: Path, shot: str) -> list:
    """Open `page`: no SEVERE console entry, no overlapping labels, a full-page screenshot; its plots."""
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    measured = text_overlaps(browser)
    assert measured["labels"] > 20 and measured["overlaps"] == [], measured["overlaps"][:10]
    plots = browser.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert all(p.size["width"] > 300 and p.size["height"] > 40 for p in plots)
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = browser.get_window_size()
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(size["width"], min(max(height, 600), 12000))
    try:
        assert browser.save_screenshot(str(SHOTS / shot))
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert (SHOTS / shot).stat().st_size > 10_000
    return plots


def say_simulated(plots) -> list[str]:
    """The plots (by aria-label) that do not say they were simulated."""
    return [p.get_attribute("aria-label") for p in plots if "simulated" not in p.get_attribute("textContent")]


def test_run_report_renders_with_its_plots(browser, run_out):
    from selenium.webdriver.common.by import By

    plots = look(browser, run_out / "run" / "report.html", "run-report.png")
    assert len(plots) == RUN_PLOTS
    drawn = [p for p in plots if p.find_elements(By.CSS_SELECTOR, "polyline, rect")]
    assert len(drawn) >= 6                       # timeline, loss, primaries, failover, lag, throughput at least
    assert browser.find_elements(By.CSS_SELECTOR, "rect.fault")            # the kill window is shaded
    assert browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.tl-ok")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "rerun: pschaos run" in body and "None" not in body
    assert len(say_simulated(plots)) == RUN_PLOTS                          # a real run says nothing of it


def test_aggregate_report_renders(browser, run_out):
    out = run_out / "agg"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(run_out / "run"), "--out", str(out)],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0 and "1/1 runs passed" in p.stdout
    plots = look(browser, out / "report.html", "aggregate-process-report.png")
    assert len(plots) == AGGREGATE_PLOTS
    assert (out / "aggregate.json").exists() and "render-me" in (out / "summary.md").read_text()


def test_simulated_run_report_and_its_timeline(browser, sim_runs):
    from selenium.webdriver.common.by import By

    plots = look(browser, sim_runs / "nemesis-partitions" / "report.html", "sim-run-report.png")
    assert len(plots) == RUN_PLOTS and say_simulated(plots) == []
    assert "virtual seconds" in browser.find_element(By.TAG_NAME, "body").text
    timeline = browser.find_element(By.CSS_SELECTOR, "svg.timeline")
    lanes = browser.find_element(By.CSS_SELECTOR, "svg.tllanes").get_attribute("textContent")
    assert "shard-0/0" in lanes and "worker-0" in lanes
    assert len(timeline.find_elements(By.CSS_SELECTOR, "rect.fault")) >= 7
    one = timeline.size
    browser.find_element(By.CSS_SELECTOR, "label[for=tlz8]").click()
    assert timeline.size["width"] > 7 * one["width"]                        # zoomed by CSS alone,
    assert timeline.size["height"] == one["height"]                         # in time only
    assert text_overlaps(browser)["overlaps"] == []                          # the 8x ticks fit too
    browser.find_element(By.CSS_SELECTOR, "label[for=tlz1]").click()


def test_failing_evidence_links_to_its_moment(browser, sim_runs, tmp_path):
    """A check whose evidence names an operation links to that operation's moment in the timeline.

    The failure is planted in a copy of a real run's report (the checkers' own failures are the
    bug zoo's business); what is tested is the way from the evidence to the timeline."""
    from selenium.webdriver.common.by import By

    from reports import html

    src = sim_runs / "kill-primary"
    report = json.loads((src / "report.json").read_text())
    history = [json.loads(line) for line in (src / "history.jsonl").read_text().splitlines() if line.strip()]
    pushes = [e for e in history if e.get("f") == "push" and e["type"] == "ok"]
    op = pushes[len(pushes) * 4 // 5]
    report["verdict"] = "fail"
    report["checks"]["no-lost-acks"] = {"valid": False, "details": {"lost": 1, "examples": [{"op": op["op_id"]}]}}
    page = html.write(report, history, tmp_path)
    browser.get(page.as_uri())
    browser.find_element(By.CSS_SELECTOR, "label[for=tlz8]").click()       # zoomed in: the moment is off screen
    browser.find_element(By.CSS_SELECTOR, "ul.moments a").click()
    target = browser.execute_script(
        "const t = document.querySelector(':target'), s = document.querySelector('.tlscroll');"
        "if (!t) return null; const a = s.getBoundingClientRect(), b = t.getBoundingClientRect();"
        "return [t.id, t.textContent, getComputedStyle(t).strokeWidth, b.left >= a.left && b.right <= a.right, "
        "b.top < window.innerHeight && b.bottom > 0];")
    assert target is not None and target[0].startswith("moment-") and op["op_id"] in target[1]
    assert target[2] == "4px"                                                # highlighted where it happened
    assert target[3] and target[4]                                           # and scrolled into view


def test_aggregate_of_sixteen_scenarios(browser, sim_runs, tmp_path):
    from selenium.webdriver.common.by import By

    out = tmp_path / "agg"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(sim_runs), "--out", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr
    agg = json.loads((out / "aggregate.json").read_text())
    assert len(agg["scenarios"]) >= 16 and agg["simulated_runs"] == agg["runs"]
    plots = look(browser, out / "report.html", "aggregate-report.png")
    assert len(plots) == AGGREGATE_PLOTS and say_simulated(plots) == []
    hrefs = [a.get_attribute("href") for a in browser.find_elements(By.LINK_TEXT, "report")]
    assert len(hrefs) == agg["runs"]
    assert all(Path(unquote(urlparse(h).path)).is_file() for h in hrefs)     # each run links to its own page
    assert "None" not in browser.find_element(By.TAG_NAME, "body").text


def test_scale_run_and_sweep_pages(browser, tmp_path):
    """The scale level's pages (issue 11) in the same browser checks: a 10,000-worker day and the
    copies-vs-repair sweep with its Markov lines; every plot says simulated."""
    def cli(*args: str) -> None:
        p = subprocess.run([sys.executable, "-m", "harness.cli", "sim", *args], capture_output=True, text=True,
                           timeout=300, cwd=REPO)
        assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    cli("scale", "--workers", "10000", "--shards", "500", "--hours", "24", "--failures", "osdi14", "--out",
        str(tmp_path / "run"))
    cli("sweep", str(REPO / "scenarios" / "sweeps" / "copies-vs-repair.yaml"), "--out", str(tmp_path / "sweep"),
        "-j", "2")
    for page, shot, want in ((tmp_path / "run" / "report.html", "scale-run-report.png", 2),
                             (tmp_path / "sweep" / "report.html", "scale-sweep-report.png", 1)):
        plots = look(browser, page, shot)
        assert len(plots) == want
        assert say_simulated(plots) == []
