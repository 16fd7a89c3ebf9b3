"""`pschaos demo` (`make demo`): a local 2x3 cluster trains, its shard-0 primary is SIGKILLed
mid-training, and the outcome is printed: failover time, acknowledged updates lost (none),
exactly-once, final loss."""
from __future__ import annotations

from pathlib import Path

from pschaos.harness.run.runner import Runner
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.run import library


def demo(args) -> int:
    sc = load_scenario(library.path_of("kill-primary"))
    print(f"pschaos demo: {sc.description.strip()}\n")
    rep = Runner(sc, args.seed, Path(args.out)).run()
    m, c = rep["metrics"], rep["checks"]
    fo = rep.get("failover_times", [])
    print()
    for f in fo:
        print(f"  killed {f['target']} (primary of shard {f['shard']}); shard {f['shard']} acked again at "
              f"epoch {f['new_epoch']} after {f['ms']} ms")
    print(f"  acknowledged updates: {m['acked_updates']}, lost: {m['lost_acked_updates']}")
    print(f"  exactly-once: {c['exactly-once']['valid']}  one primary per epoch: {c['single-primary']['valid']}  "
          f"copies equal at the end: {c['replicas-match']['valid']}")
    print(f"  final training loss {m['final_loss']} (target {c['converged']['details'].get('target_loss')})")
    print(f"\nverdict: {rep['verdict'].upper()}   report: {Path(args.out) / 'report.json'} "
          f"(and report.html, junit.xml, summary.md)")
    print(f"rerun:   {rep['rerun']}")
    return 0 if rep["verdict"] == "pass" else 1
