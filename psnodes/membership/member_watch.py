"""A node's view of worker membership: poll etcd, gate by the newest generation, reconcile.

Every copy reads `<prefix>workers/` every `member_poll_s` (one range read) and adopts a newer
generation for its BSP/SSP gate (ShardNode.adopt_members; a replica too, so a promoted one has
it). A primary also reconciles: a registration not in the record joins at its shard's front, a
member whose registration is gone is dropped (pschaos.psnodes.core.membership.reconcile), written by
compare-and-swap; several primaries may try at once and exactly one wins each generation.

Shards learn a generation at different moments (up to one poll apart). Each gates a pull by the
generation it holds, and a worker's step waits on every shard's pull, so a step is held by the
members of every generation its shards gated by: a joiner counts from the first shard that
adopts it, a leaver until the last one does. psnodes never serves a gated pull before it read a
generation (the implicit generation 0, the config's workers, when none is written yet), and
serves a gated pull only to a member of the generation it holds.

Only a cluster whose config says `barrier: true` (some worker trains BSP/SSP) runs a watch
(psnodes/serve.py): async training spends no polls and writes no record. A config worker still
unregistered `member_join_grace_s` after this watch began is dropped by a primary's reconcile
(JoinGrace). A record that does not parse is logged as an error: the view stays as it was.
"""
from __future__ import annotations

import logging
import threading
import time

from pschaos.psnodes.core import membership
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.etcd import Etcd
from pschaos.psnodes.membership.members import JoinGrace, change_event, encode, joined_still_registered, parse, plan, prefix, record_key

log = logging.getLogger("psnodes.members")    # under "psnodes", the logger server/logs.py sets up


class MemberWatch(threading.Thread):
    def __init__(self, node) -> None:
        super().__init__(name=f"{node.name}-members", daemon=True)
        self.node = node
        # a session of its own: the polls never queue behind (or ahead of) the lease keepalives
        self.etcd = Etcd(node.etcd.endpoint, timeout=0.5) if isinstance(node.etcd, Etcd) else node.etcd
        self.grace = JoinGrace(node.cfg.member_join_grace_s)

    def run(self) -> None:
        node = self.node
        while not node.stopping.is_set():
            try:
                self.tick()
            except PSError as e:        # etcd away: the view stays as it is
                log.debug("%s: membership poll: %s", node.name, e)
            except ValueError as e:     # a record that does not parse: say so loudly, keep the view
                log.error("%s: membership record unreadable, gating by generation %s: %s", node.name,
                          node.members.generation if node.members is not None else None, e)
            node.stopping.wait(node.cfg.member_poll_s)

    def tick(self) -> None:
        node, cfg = self.node, self.node.cfg
        snap = parse(self.etcd.get_prefix(prefix(cfg)), cfg)
        with node.cond:
            primary = node.is_primary() and node.lease_valid()
            front = membership.front(node.store.clocks)
        overdue = self.grace.overdue(snap, cfg.workers, time.monotonic())
        view, write = plan(snap, primary, front, cfg.workers, overdue)
        node.adopt_members(view)
        if write is None:
            return
        rec, changes = write
        if self.etcd.cas(record_key(cfg), snap.revision, encode(rec),
                         also_compare=joined_still_registered(cfg, snap, changes)):
            for c in changes:
                node.events.emit(*change_event(c, node.name))
            node.adopt_members(rec)
