"""An idle primary heartbeats each replica at its period, not at RPC rate (real processes, real etcd).

Its senders share one condition that every reply notifies; a sender that sent a heartbeat
whenever it woke answered its sibling's replies, and the two ping-ponged at RPC rate (thousands of
calls a second on an idle shard, CPU the heartbeats' own timing depends on).
"""
import re
import time
import urllib.request

from pschaos.harness.machinery.procs import wait_until
from pschaos.psnodes.wire.wire import encode_replicate


def replication_bytes(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    m = re.search(r"^ps_replication_bytes_total ([0-9.e+]+)$", text, re.M)
    assert m, "the primary exports no ps_replication_bytes_total"
    return float(m.group(1))


def test_idle_primary_sends_heartbeats_at_their_period(make_cluster):
    be = make_cluster(shards=1, copies=3, replication="sync")
    rec = be.routing()[0]
    assert wait_until(lambda: len(be.routing()[0].isr) == 3, 10, 0.05), "replicas never joined the ISR"
    time.sleep(0.5)
    st = be.status(rec.primary)
    beat = len(encode_replicate(0, st.epoch, rec.primary, [], st.seq, 0, b"", st.epoch))
    port = be.cfg.metrics_ports[rec.primary]
    b0, t0 = replication_bytes(port), time.monotonic()
    time.sleep(2.0)
    b1, t1 = replication_bytes(port), time.monotonic()
    calls_per_s = (b1 - b0) / beat / (t1 - t0)
    expected = 2 / be.cfg.heartbeat_s                # two replicas, one heartbeat per period each
    print(f"idle heartbeats: {calls_per_s:.0f} calls/s, expected {expected:.0f}")
    assert calls_per_s <= 2 * expected, f"{calls_per_s:.0f} replicate calls/s on an idle shard, " \
        f"expected about {expected:.0f} (two replicas, heartbeat_s={be.cfg.heartbeat_s})"
    assert calls_per_s >= expected / 3, f"only {calls_per_s:.1f} heartbeats/s: the replicas would suspect the primary"
