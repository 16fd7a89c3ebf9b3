"""Interrupt soak: N SIGINTs and N SIGKILL+`pschaos clean` at random moments of a run, and the
debris each left (processes, nftables tables, Toxiproxy proxies). Issue 7 asks for 20 + 20 at 0.

    .venv/bin/python benchmarks/interrupt_soak.py [--sigints 20] [--sigkills 20] [--seed N] [--json FILE]

Exit status 0 when every round left nothing and every SIGINTed harness exited by itself.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.interrupts import soak, summary  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sigints", type=int, default=20)
    ap.add_argument("--sigkills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-delay", type=float, default=12.0, help="latest moment of a signal, s after start")
    ap.add_argument("--json", type=Path, default=None, help="write every round and the summary here")
    args = ap.parse_args()

    def show(r) -> None:
        extra = f" exit {r.exit_s}s rc {r.returncode}" if r.exit_s is not None else ""
        print(f"{r.kind:14} at {r.delay_s:5.2f}s ({r.phase:8}) -> processes {r.processes} tables {r.tables} "
              f"proxies {r.proxies}{extra}{'  ' + '; '.join(r.notes) if r.notes else ''}", flush=True)

    rounds = soak(args.sigints, args.sigkills, args.seed, args.max_delay, progress=show)
    s = summary(rounds)
    for k in ("sigint", "sigkill_clean"):
        t = s[k]
        print(f"{k}: {t['clean_rounds']}/{t['rounds']} clean; left processes {t['processes_left']}, "
              f"tables {t['tables_left']}, proxies {t['proxies_left']}; phases {t['phases']}"
              + (f"; exit after SIGINT median {t['exit_s_median']}s max {t['exit_s_max']}s"
                 if t["exit_s_max"] is not None else ""))
    if args.json:
        args.json.write_text(json.dumps({"rounds": [r.to_json() for r in rounds], "summary": s}, indent=1))
    return 0 if all(r.clean and not r.notes for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
