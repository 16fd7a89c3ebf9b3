"""junit.xml: one test case per check, so any CI system shows which guarantee broke.

A check that is False is a <failure>, "unknown" an <error> (the checker could not decide), and
the evidence (the checker's details) is the element's text; a check the scenario excluded is
<skipped> with its reason. Properties carry seed and rerun.
"""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from xml.etree import ElementTree as ET


def build(report: dict) -> ET.Element:
    name = f"pschaos.{report['scenario']}"
    checks = report.get("checks", {})
    failures = sum(1 for c in checks.values() if c["valid"] is False)
    errors = sum(1 for c in checks.values() if c["valid"] not in (True, False))
    excluded = report.get("excluded_checks") or {}
    tests, skipped = str(len(checks) + len(excluded)), str(len(excluded))
    wall = f"{float(report.get('wall_s', 0.0)):.3f}"
    root = ET.Element("testsuites", name="pschaos", tests=tests, failures=str(failures),
                      errors=str(errors), skipped=skipped, time=wall)
    suite = ET.SubElement(root, "testsuite", name=name, tests=tests, failures=str(failures),
                          errors=str(errors), skipped=skipped, time=wall,
                          timestamp=time.strftime("%Y-%m-%dT%H:%M:%S"), hostname=socket.gethostname())
    props = ET.SubElement(suite, "properties")
    for k in ("scenario", "backend", "seed", "verdict", "rerun"):
        ET.SubElement(props, "property", name=k, value=str(report.get(k, "")))
    for check, c in checks.items():
        case = ET.SubElement(suite, "testcase", classname=name, name=check, time="0")
        evidence = json.dumps(c.get("details", {}), indent=1, default=str)
        if c["valid"] is False:
            el = ET.SubElement(case, "failure", message=f"{check} does not hold (seed {report.get('seed')})",
                               type="CheckFailed")
            el.text = evidence + f"\nrerun: {report.get('rerun')}"
        elif c["valid"] is not True:
            el = ET.SubElement(case, "error", message=f"{check} could not decide", type="CheckUnknown")
            el.text = evidence
        else:
            ET.SubElement(case, "system-out").text = evidence[:4000]
    for check, why in excluded.items():       # a check the scenario excluded shows, with its reason
        case = ET.SubElement(suite, "testcase", classname=name, name=check, time="0")
        ET.SubElement(case, "skipped", message=f"excluded by the scenario: {why}")
    return root


def write(report: dict, out_dir: Path) -> Path:
    path = out_dir / "junit.xml"
    tree = ET.ElementTree(build(report))
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path
