"""Entry point of one shard node: `python -m pschaos.psnodes.serve --config C --name shard-0/1`.

SIGTERM is a graceful stop: the node writes its local checkpoint (so a restart catches up by
delta), gives its lease back and exits 0. SIGKILL is the crash that failover is for.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from pschaos.psnodes.wire.channels import check_loopback
from pschaos.psnodes.config import ClusterConfig, etcd_url, load_links
from pschaos.psnodes.replication.election import Elector
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.etcd import Etcd
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.membership.member_watch import MemberWatch
from pschaos.psnodes.server.logs import LEVELS, setup as setup_logging
from pschaos.psnodes.server.tuning import tune_malloc
from pschaos.psnodes.server.metrics import NodeMetrics
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.replication.replication import ReplicationManager
from pschaos.psnodes.server.servicer import make_server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pschaos.psnodes.serve", description=__doc__)
    ap.add_argument("--config", required=True, help="cluster config JSON")
    ap.add_argument("--name", required=True, help="node name, shard-<i>/<r>")
    ap.add_argument("--links", help="JSON link map: node name -> address to dial (default: their own)")
    ap.add_argument("--events", help="event log path (JSON lines)")
    ap.add_argument("--log-level", choices=LEVELS, help="log level (default: $PSNODES_LOG_LEVEL or debug)")
    args = ap.parse_args(argv)
    tune_malloc()
    try:
        setup_logging(args.name, args.log_level)
        cfg = ClusterConfig.load(args.config)
        if args.name not in cfg.addresses:
            raise PSError(f"--name {args.name!r} has no address in the config's addresses")
        address = cfg.addresses[args.name]
        check_loopback(address, f"addresses[{args.name!r}]")
        links = load_links(args.links, cfg)
    except (PSError, ValueError) as e:
        print(f"psnodes: {e}", file=sys.stderr)
        return 2
    events = EventLog(__import__("pathlib").Path(args.events) if args.events else None, args.name)
    metrics = NodeMetrics(args.name)
    if args.name in cfg.metrics_ports:
        metrics.serve(cfg.metrics_ports[args.name])
    etcd = Etcd(etcd_url(cfg, links), timeout=0.5)
    node = ShardNode(cfg, args.name, links, etcd, events, metrics)
    node.load_local()
    ReplicationManager(node)
    server = make_server(node, address)
    server.start()
    elector = Elector(node)
    while True:
        try:
            elector.register()
            break
        except PSError as e:
            print(f"psnodes {args.name}: waiting for etcd: {e}", file=sys.stderr)
            time.sleep(0.2)
    threading.Thread(target=elector.keepalive, daemon=True).start()
    elector.bootstrap()
    elector.start()
    if cfg.barrier:         # some worker trains BSP/SSP: keep its membership (async spends nothing on it)
        MemberWatch(node).start()
    events.emit("start", {"shard": node.shard, "seq": node.store.seq, "role": node.role, "epoch": node.epoch})
    done = threading.Event()

    def on_term(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    # periodic checkpoints: the local one when the state moved; the shared one too while primary
    # (node.checkpoint writes it only while this node is still the primary of the current epoch,
    # and tries again next period when it could not, e.g. while a replica had not caught up)
    shared_dir = str(cfg.checkpoint_dir(node.shard))
    last_seq, last_shared = node.store.seq, False
    while not done.wait(cfg.checkpoint_interval_s):
        if node.store.seq != last_seq or (node.role == "primary" and not last_shared):
            try:
                man = node.checkpoint()
                last_seq, last_shared = man["seq"], man["path"] == shared_dir
            except OSError as e:
                events.emit("checkpoint-error", {"error": str(e)})
    node.stopping.set()
    server.stop(grace=0.2)
    node.checkpoint(shared=node.role == "primary")
    etcd.revoke(node.lease)
    events.emit("stop", {"shard": node.shard, "seq": node.store.seq})
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
