"""Redis with Sentinel: a master, its replicas and three Sentinels on 127.0.0.1.

Updates are one MULTI/EXEC (INCRBY the key's counter, HINCRBYFLOAT its accumulator, SADD the op
id), acknowledged by EXEC's reply, and with `wait_replicas` > 0 only once WAIT says that many
replicas have it. Clients find the master as Redis' own clients do, by asking the Sentinels,
and keep their connection until it errs; they reach each server by its unix socket, so a
partition (nftables on the server's TCP port) cuts it from its replicas and the Sentinels but
not from its clients, the split that Sentinel's documentation warns loses writes.
"""
from __future__ import annotations

from pschaos.harness.errors import MissingDependency
from pschaos.harness.machinery.tools import need
from pschaos.harness.backends.adapters.api import Adapter, Refused

MASTER = "mymaster"


class RedisSentinel(Adapter):
    name = "redis-sentinel"
    checks = ("no-lost-updates", "counters-match", "linearizable-reads")
    default_checks = ("no-lost-updates", "counters-match")
    options = {"down_after_ms": (int, 1000), "quorum": (int, 2), "wait_replicas": (int, 0),
               "wait_timeout_ms": (int, 100), "socket_timeout_s": (float, 10.0), "partition_keeps_replica": (bool, False)}
    settle_s = 40.0      # Sentinel waits 8 s before it turns a returned old master into a replica

    @classmethod
    def scenario_error(cls, copies: int, options: dict) -> str | None:
        if options.get("partition_keeps_replica") and copies < 2:
            return (f"system_options.partition_keeps_replica: the master keeps a replica's link, and with "
                    f"cluster.copies: {copies} it has none; set copies: 3 or remove partition_keeps_replica")
        if options.get("wait_replicas", 0) > copies - 1:
            return (f"system_options.wait_replicas: {options['wait_replicas']} replicas cannot acknowledge with "
                    f"cluster.copies: {copies} ({copies - 1} replicas); lower wait_replicas or raise copies")
        return None

    def configure(self) -> None:
        need("redis-server"), need("redis-sentinel")     # MissingDependency with the install command
        try:
            import redis  # noqa: F401
        except ImportError:
            raise MissingDependency("the redis Python client is not installed; install it with: "
                                    ".venv/bin/pip install redis   (or: make install)") from None
        self.sentinels = [f"sentinel-{i}" for i in range(3)]
        ports = self.env.ports(len(self.nodes) + 3)
        self.port = dict(zip(self.nodes + self.sentinels, ports))
        self.conf = {}
        for r, n in enumerate(self.nodes):
            lines = [f"port {self.port[n]}", "bind 127.0.0.1", "set-proc-title no", f"unixsocket {self.sock(n)}",
                     "unixsocketperm 700",
                     f"dir {self.env.data(n)}", 'save ""', "appendonly no", "repl-diskless-sync no"]
            if r:
                lines.append(f"replicaof 127.0.0.1 {self.port[self.nodes[0]]}")
            self._write(n, lines)
        o = self.opt
        for s in self.sentinels:
            self._write(s, [f"port {self.port[s]}", "bind 127.0.0.1", "set-proc-title no", f"dir {self.env.data(s)}",
                            f"sentinel monitor {MASTER} 127.0.0.1 {self.port[self.nodes[0]]} {o['quorum']}",
                            f"sentinel down-after-milliseconds {MASTER} {o['down_after_ms']}",
                            f"sentinel failover-timeout {MASTER} 10000", f"sentinel parallel-syncs {MASTER} 2"])
        # set-proc-title no: a retitled Redis overwrites its environment, and with it the run tag
        # that `pschaos clean` finds a dead run's processes by

    def _write(self, name: str, lines: list[str]) -> None:
        self.conf[name] = self.env.data(name) / ("sentinel.conf" if name.startswith("sentinel") else "redis.conf")
        self.conf[name].write_text("\n".join(lines) + "\n")   # Redis rewrites it on failover (CONFIG REWRITE)

    def sock(self, node: str) -> str:
        return str(self.env.sock_dir / (node.replace("/", "-") + ".sock"))

    def commands(self) -> dict[str, list[str]]:
        cmds = {n: ["redis-server", str(self.conf[n])] for n in self.nodes}
        return cmds | {s: ["redis-sentinel", str(self.conf[s])] for s in self.sentinels}

    def peer_ports(self, node: str) -> list[int]:
        return [self.port[node]]

    def cut(self, node: str) -> list[str]:
        """With `partition_keeps_replica`, the isolated master keeps its first replica's link (the
        replica's own port is cut, so the Sentinels lose both): the minority side that Sentinel's
        documentation describes, where WAIT still finds a replica to acknowledge."""
        if not self.opt["partition_keeps_replica"]:
            return super().cut(node)
        keep = next(n for n in self.nodes if n != node)
        link = next(c for c in self._redis(keep).client_list() if "M" in c["flags"])   # its link to the master
        eph = int(c_port(link["laddr"]))
        p = self.port[node]
        return [f"tcp dport {p} tcp sport != {eph}", f"tcp sport {p} tcp dport != {eph}",
                *super().cut(keep)]

    def _redis(self, node: str, timeout: float = 0.5):
        """A connection that tries each command once: redis-py's default retries a MULTI on a new
        connection to the same address, which after a kill is the restarted, empty old master."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        kw = dict(socket_timeout=timeout, decode_responses=True, retry=Retry(NoBackoff(), 0))
        if node.startswith("sentinel"):
            return redis.Redis(host="127.0.0.1", port=self.port[node], **kw)
        return redis.Redis(unix_socket_path=self.sock(node), **kw)

    def _view(self) -> tuple[int, str | None]:
        """(config epoch, master) as the Sentinel with the highest config epoch has it."""
        best: tuple[int, str | None] = (-1, None)
        by_port = {p: n for n, p in self.port.items()}
        for s in self.sentinels:
            try:
                m = self._redis(s).execute_command("SENTINEL", "MASTER", MASTER)
            except Exception:  # noqa: BLE001 - a Sentinel down or paused: ask the next
                continue
            m = dict(zip(m[::2], m[1::2])) if isinstance(m, list) else m
            best = max(best, (int(m["config-epoch"]), by_port.get(int(m["port"]))), key=lambda x: x[0])
        return best

    def view(self, group: int = 0) -> tuple[int, str | None]:
        epoch, master = self._view()
        return max(epoch, 0), master

    def primary(self, group: int = 0) -> str | None:
        return self._view()[1]

    def epoch(self, group: int = 0) -> int:
        return self.view(group)[0]

    def _replication(self, node: str) -> dict:
        return self._redis(node).info("replication")

    def progress(self, node: str) -> dict | None:
        i = self._replication(node)
        return {"role": i["role"], "offset": int(i.get("master_repl_offset", 0))}

    def up(self, name: str) -> bool:
        if name in self.sentinels or name == self.nodes[0]:
            return bool(self._redis(name).ping())
        return self._replication(name).get("master_link_status") == "up"

    def ready(self) -> bool:
        master = self.primary()
        if master is None or self._replication(master).get("connected_slaves") != len(self.nodes) - 1:
            return False
        m = self._redis(self.sentinels[0]).execute_command("SENTINEL", "MASTER", MASTER)
        m = dict(zip(m[::2], m[1::2])) if isinstance(m, list) else m
        return int(m["num-other-sentinels"]) == 2 and int(m["num-slaves"]) == len(self.nodes) - 1

    def settled(self) -> bool:
        """One node says master (the Sentinels' master), every other is its replica, link up, at its offset."""
        master = self.primary()
        infos = {n: self._replication(n) for n in self.nodes}
        if master is None or [n for n, i in infos.items() if i["role"] == "master"] != [master]:
            return False
        off = infos[master]["master_repl_offset"]
        return all(i.get("master_link_status") == "up" and i.get("master_port") == self.port[master]
                   and i["slave_repl_offset"] == off for n, i in infos.items() if n != master)

    def client(self, worker: str) -> "RedisClient":
        return RedisClient(self)

    def final(self, keys: list[str]) -> tuple[str, dict[str, dict]]:
        node = self.primary()
        r = self._redis(node, timeout=5.0)
        acc = r.hgetall("acc")
        return node, {k: {"ops": sorted(int(x) for x in r.smembers(f"ops:{k}")), "count": int(r.get(f"c:{k}") or 0),
                          "sum": float(acc.get(k, 0.0))} for k in keys}


def c_port(addr: str) -> str:
    return addr.rsplit(":", 1)[1]


class RedisClient:
    """A client as redis-py's Sentinel support behaves: ask the Sentinels for the master, keep the
    connection while it answers, ask again after an error."""

    def __init__(self, a: RedisSentinel) -> None:
        self.a, self.node, self.conn, self.epoch = a, None, None, None

    def _conn(self):
        if self.conn is None:
            self.epoch, self.node = self.a._view()      # the config epoch that named it: failovers are timed by it
            if self.node is None:
                raise Refused("no Sentinel names a master")
            self.conn = self.a._redis(self.node, timeout=self.a.opt["socket_timeout_s"])
        return self.conn

    def update(self, key: str, op: int, amount: float) -> str:
        from redis.exceptions import ExecAbortError, ReadOnlyError

        try:
            p = self._conn().pipeline(transaction=True)
            p.incrby(f"c:{key}", 1).hincrbyfloat("acc", key, amount).sadd(f"ops:{key}", op)
            p.execute()
            want = self.a.opt["wait_replicas"]
            if want and (got := self.conn.wait(want, self.a.opt["wait_timeout_ms"])) < want:
                raise TimeoutError(f"WAIT: {got} of {want} replicas acknowledged")   # applied, not acked
        except (ReadOnlyError, ExecAbortError) as e:         # a replica now: the transaction did not run
            self.close()
            raise Refused(str(e)) from None
        except Exception:
            self.close()
            raise
        return self.node

    def read(self, key: str) -> int:
        try:
            return int(self._conn().get(f"c:{key}") or 0)
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None
