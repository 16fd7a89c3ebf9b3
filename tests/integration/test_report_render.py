"""Reports as people see them: report.html of a real run, and an aggregate, in headless Chromium.

Each page renders with no console errors and shows its plots; a screenshot is kept in
out/screenshots/ beside the test output.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tools import REPO

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


def look(browser, page: Path, shot: str) -> list:
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    plots = browser.find_elements(By.CSS_SELECTOR, "svg.plot")
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SHOTS / shot))
    assert (SHOTS / shot).stat().st_size > 10_000
    return plots


def test_run_report_renders_with_its_plots(browser, run_out):
    from selenium.webdriver.common.by import By

    plots = look(browser, run_out / "run" / "report.html", "run-report.png")
    assert len(plots) == 6
    assert all(p.size["width"] > 300 and p.size["height"] > 40 for p in plots)
    drawn = [p for p in plots if p.find_elements(By.CSS_SELECTOR, "polyline, rect")]
    assert len(drawn) >= 5                       # loss, primaries, failover, lag, throughput at least
    assert browser.find_elements(By.CSS_SELECTOR, "rect.fault")            # the kill window is shaded
    assert "rerun: pschaos run" in browser.find_element(By.TAG_NAME, "body").text


def test_aggregate_report_renders(browser, run_out):
    out = run_out / "agg"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(run_out / "run"), "--out", str(out)],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0 and "1/1 runs passed" in p.stdout
    plots = look(browser, out / "report.html", "aggregate-report.png")
    assert len(plots) == 3
    assert (out / "aggregate.json").exists() and "render-me" in (out / "summary.md").read_text()
