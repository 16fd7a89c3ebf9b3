"""Reports as people see them, in headless Chromium: a run's report.html and aggregates.

Each page renders with no SEVERE console entry, shows every plot, and no two text labels'
boxes overlap (measured in the page, `page_checks`). A simulated run's plots say "simulated";
the timeline zooms with CSS alone, and a failing check's evidence links to its moment there.
Full-page screenshots are kept in out/screenshots/ as test artifacts.
"""
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from pschaos.harness.machinery.tools import REPO

from .page_checks import text_overlaps
from tests.unit.helpers import only_text

# one xdist worker for the module: its twin runs are made once, and no second worker sits blocked
# on their lock (48 s of one worker in a CI run). The fixtures are session-scoped: that worker
# runs other modules' tests between these, and module-scoped ones were set up again after them
# (a second setup of 26 s in one run, 38 s in CI)
pytestmark = pytest.mark.xdist_group("report-render")

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


@pytest.fixture(scope="session")
def browser():
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        why = "chromium and chromium-driver are needed (apt-get install chromium chromium-driver, or make install)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set: {why}")                  # in CI a missing browser is a failure, not a skip
        pytest.skip(why)
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


@pytest.fixture(scope="session")
def run_out(tmp_path_factory):
    d = tmp_path_factory.mktemp("render")
    (d / "render-me.yaml").write_text(only_text(SCENARIO))
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(d / "render-me.yaml"), "--seed", "3",
                        "--out", str(d / "run"), "--quiet"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    return d


LONG_NAME = "kill-primary-under-a-scenario-name-too-long-for-any-label"      # > 40 characters: clipped
EXTRA_SEEDS = (2,)                                                          # kill-primary: two seeds, one more than the library pass made


def _library_runs(d: Path) -> set[str]:
    """The twin's runs of SIM_SCENARIOS at seed 1 that `make test`'s library pass on the twin made
    just before this session (PSCHAOS_LIBRARY_RUNS: that pass's --pschaos-out), copied to
    d/<scenario>: the same runs, not made twice. Without it (this module alone) none."""
    src, have = os.environ.get("PSCHAOS_LIBRARY_RUNS"), set()
    for rep in sorted(Path(src).glob("*/report.json")) if src else []:
        r = json.loads(rep.read_text())
        name = r.get("scenario")
        if (name in SIM_SCENARIOS and name not in have and r.get("seed") == 1 and r.get("backend") == "sim"
                and (rep.parent / "report.html").exists()):
            shutil.copytree(rep.parent, d / name)
            have.add(name)
    return have


def _make_sim_runs(d: Path) -> None:
    made = _library_runs(d)
    paths = [str(REPO / "scenarios" / f"{n}.yaml") for n in SIM_SCENARIOS if n not in made]
    long = d.parent / f"{LONG_NAME}.yaml"
    long.write_text((REPO / "scenarios" / "kill-primary.yaml").read_text()
                    .replace("name: kill-primary", f"name: {LONG_NAME}", 1))
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", *paths, str(long), "--backend", "sim",
                        "--seed", "1", "--out", str(d), "--quiet"], capture_output=True, text=True, timeout=900, cwd=REPO)
    missing = [n for n in SIM_SCENARIOS + [LONG_NAME] if not (d / n / "report.html").exists()]
    assert p.returncode != 2 and not missing, (missing, p.stdout[-3000:], p.stderr[-3000:])
    for seed in EXTRA_SEEDS:
        p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(REPO / "scenarios" / "kill-primary.yaml"),
                            "--backend", "sim", "--seed", str(seed), "--out", str(d / f"kill-primary-seed{seed}"),
                            "--quiet"], capture_output=True, text=True, timeout=300, cwd=REPO)
        assert p.returncode != 2 and (d / f"kill-primary-seed{seed}" / "report.json").exists(), p.stderr[-2000:]


@pytest.fixture(scope="session")
def sim_runs(tmp_path_factory):
    """Seventeen library scenarios on the twin, seed 1, one of them again under a long name, and
    kill-primary on one more seed: DIR/<scenario>/report.json, DIR/kill-primary-seed<N>/.

    Under xdist each worker that runs a test of this module sets this fixture up; the runs are
    made once per session (in the session's shared temp folder, under a lock) and reused."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.getbasetemp().parent          # this session's, shared by its workers
        with open(root / "sim-runs.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            d = root / "sim-runs" / "runs"
            if not (d.parent / "done").exists():
                shutil.rmtree(d.parent, ignore_errors=True)
                d.mkdir(parents=True)
                _make_sim_runs(d)
                (d.parent / "done").touch()
        return d
    d = tmp_path_factory.mktemp("sim-runs") / "runs"
    d.mkdir()
    _make_sim_runs(d)
    return d


def drawn(plots) -> list[bool]:
    """Per plot: does it draw anything (not the 'nothing to plot' placeholder, and some mark)?"""
    from selenium.webdriver.common.by import By

    return ["empty" not in (p.get_attribute("class") or "").split()
            and bool(p.find_elements(By.CSS_SELECTOR, "polyline, rect, circle")) for p in plots]


def run_has_data(report: dict, history: list[dict]) -> list[bool]:
    """Which of a run page's plots the run has data for, in page order (the sections of html.render)."""
    from pschaos.reports import html

    end = max((e["t"] for e in history), default=1.0)
    return [bool(history), bool(html.loss_series(history)), bool(html.primary_lanes(history, end)),
            bool(html.failover_items(report)), bool(html.lag_series(history)), bool(html.sync_items(history)),
            bool(html.throughput(history))]


def _load(run: Path) -> tuple[dict, list[dict]]:
    report = json.loads((run / "report.json").read_text())
    return report, [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines() if x.strip()]


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
    want = run_has_data(*_load(run_out / "run"))
    assert sum(want) >= 6 and drawn(plots) == want       # a placeholder only where the run has no data
    assert browser.find_elements(By.CSS_SELECTOR, "rect.fault")            # the kill window is shaded
    assert browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.tl-ok")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "rerun: pschaos run" in body and "None" not in body
    assert len(say_simulated(plots)) == RUN_PLOTS                          # a real run says nothing of it


def test_aggregate_report_renders(browser, run_out):
    out = run_out / "agg"
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "report", str(run_out / "run"), "--out", str(out)],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0 and "1/1 runs passed" in p.stdout
    plots = look(browser, out / "report.html", "aggregate-process-report.png")
    assert len(plots) == AGGREGATE_PLOTS and drawn(plots) == [True, True, True, True]   # one kill: a failover
    assert (out / "aggregate.json").exists() and "render-me" in (out / "summary.md").read_text()


def test_simulated_run_report_and_its_timeline(browser, sim_runs):
    from selenium.webdriver.common.by import By

    plots = look(browser, sim_runs / "nemesis-partitions" / "report.html", "sim-run-report.png")
    assert len(plots) == RUN_PLOTS and say_simulated(plots) == []
    assert drawn(plots) == run_has_data(*_load(sim_runs / "nemesis-partitions"))
    assert "virtual seconds" in browser.find_element(By.TAG_NAME, "body").text
    timeline = browser.find_element(By.CSS_SELECTOR, "svg.timeline")
    lanes = browser.find_element(By.CSS_SELECTOR, "svg.tllanes").get_attribute("textContent")
    assert "shard-0/0" in lanes and "worker-0" in lanes
    assert len(timeline.find_elements(By.CSS_SELECTOR, "rect.fault")) >= 7
    seen = zoom_levels(browser)
    print("timeline zoom: (fault labels shown, overlapping label pairs)", seen)
    assert all(n == 0 for _, n in seen.values()) and seen[1][0] >= 1 and seen[8][0] >= seen[1][0]


def zoom_levels(browser) -> dict[int, tuple[int, int]]:
    """At each zoom: the timeline widens by CSS alone, in time only; (fault labels shown, overlapping
    label pairs on the page)."""
    from selenium.webdriver.common.by import By

    timeline = browser.find_element(By.CSS_SELECTOR, "svg.timeline")
    one = timeline.size
    seen = {}
    for z in (1, 2, 4, 8):                                   # each zoom has its own ticks and fault labels
        browser.find_element(By.CSS_SELECTOR, f"label[for=tlz{z}]").click()
        assert timeline.size["width"] > (z - 0.5) * one["width"] and timeline.size["height"] == one["height"]
        labels = browser.execute_script(
            f"return [...document.querySelectorAll('svg.timeline text.zl{z}')]"
            ".filter(t => t.getBoundingClientRect().width > 0).length")
        seen[z] = (labels, len(text_overlaps(browser)["overlaps"]))
    browser.find_element(By.CSS_SELECTOR, "label[for=tlz1]").click()
    return seen


def test_crowded_fault_labels_at_every_zoom(browser, sim_runs, tmp_path):
    """Twelve fault windows, bunched, on a simulated run: at 2x the labels laid out for 1x used to
    run under the 'simulated' badge. Planted in a copy of a real run's report."""
    from pschaos.reports import html

    report, history = _load(sim_runs / "kill-primary")
    end = max(e["t"] for e in history)
    report["faults"] = [{"kind": "pause", "target": f"shard-{i % 2}/{i % 3}", "start_s": end * f, "end_s": end * f + 0.3}
                        for i, f in enumerate((0.05, 0.2, 0.41, 0.43, 0.45, 0.47, 0.6, 0.8, 0.82, 0.84, 0.86, 0.88))]
    browser.get(html.write(report, history, tmp_path).as_uri())
    seen = zoom_levels(browser)
    print("crowded timeline zoom: (fault labels shown, overlapping label pairs)", seen)
    assert all(n == 0 for _, n in seen.values()), seen
    assert seen[8][0] == 12 > seen[1][0]                      # more room, more labels


def test_failing_evidence_links_to_its_moment(browser, sim_runs, tmp_path):
    """A check whose evidence names an operation links to that operation's moment in the timeline.

    The failure is planted in a copy of a real run's report (the checkers' own failures are the
    bug zoo's business); what is tested is the way from the evidence to the timeline."""
    from selenium.webdriver.common.by import By

    from pschaos.reports import html

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
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "report", str(sim_runs), "--out", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr
    agg = json.loads((out / "aggregate.json").read_text())
    assert len(agg["scenarios"]) >= 16 and agg["simulated_runs"] == agg["runs"]
    assert agg["scenarios"]["kill-primary"]["runs"] == 1 + len(EXTRA_SEEDS) and LONG_NAME in agg["scenarios"]
    plots = look(browser, out / "report.html", "aggregate-report.png")
    assert len(plots) == AGGREGATE_PLOTS and say_simulated(plots) == [] and all(drawn(plots))
    clipped = browser.execute_script(
        "return [...document.querySelectorAll('svg.plot text')].filter(t => t.textContent.startsWith("
        f"'{LONG_NAME[:20]}') && t.firstChild.nodeValue.endsWith('…')).length")
    assert clipped >= 3                                   # the long name clipped on the rows that name it
    hrefs = [a.get_attribute("href") for a in browser.find_elements(By.LINK_TEXT, "report")]
    assert len(hrefs) == agg["runs"]
    assert all(Path(unquote(urlparse(h).path)).is_file() for h in hrefs)     # each run links to its own page
    assert "None" not in browser.find_element(By.TAG_NAME, "body").text


def test_scale_run_and_sweep_pages(browser, tmp_path):
    """The scale level's pages (issue 11) in the same browser checks: a 10,000-worker day and the
    copies-vs-repair sweep with its Markov lines; every plot says simulated."""
    def cli(*args: str) -> None:
        p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "sim", *args], capture_output=True, text=True,
                           timeout=300, cwd=REPO)
        assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    cli("scale", "--workers", "10000", "--shards", "500", "--hours", "24", "--failures", "osdi14", "--out",
        str(tmp_path / "run"))
    cli("sweep", str(REPO / "scenarios" / "sweeps" / "copies-vs-repair.yaml"), "--out", str(tmp_path / "sweep"),
        "-j", "2")
    for page, shot, want in ((tmp_path / "run" / "report.html", "scale-run-report.png", 3),
                             (tmp_path / "sweep" / "report.html", "scale-sweep-report.png", 1)):
        plots = look(browser, page, shot)
        assert len(plots) == want
        assert say_simulated(plots) == []
