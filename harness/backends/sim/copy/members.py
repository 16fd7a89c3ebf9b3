"""psnodes/membership/member_watch.py in virtual time: a copy polls the membership keys, gates by the newest
generation, and a primary reconciles by compare-and-swap, with the same decisions
(pschaos.psnodes.membership.members.plan, pschaos.psnodes.core.membership) and the same events as the real node.

procs.py spawns the watch for a copy it sees as state.py's CopyState: what the watch reads and
adopts is the copy's (its store's clocks, its lease, `adopt_members`), never its class."""
from __future__ import annotations

from pschaos.psnodes.core import membership
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.membership.members import JoinGrace, change_event, encode, joined_still_registered, parse, plan, prefix, record_key

from pschaos.harness.backends.sim.rpc import Gen
from pschaos.harness.backends.sim.copy.state import CopyState


def member_watch(c: CopyState) -> Gen:
    """MemberWatch.run: a poll every member_poll_s until the copy stops (its process ends with it)."""
    grace = JoinGrace(c.cfg.member_join_grace_s)
    while not c.stopping:
        try:
            yield from member_tick(c, grace)
        except (PSError, ValueError):
            pass            # etcd away or a bad record: the view stays as it is
        yield c.env.timeout(c.cfg.member_poll_s)


def member_tick(c: CopyState, grace: JoinGrace) -> Gen:
    cfg = c.cfg
    kvs = yield from c.ecall(lambda: c.etcd.get_prefix(prefix(cfg)))
    snap = parse(kvs, cfg)
    primary = c.is_primary() and c.lease_valid()
    overdue = grace.overdue(snap, cfg.workers, c.now())
    view, write = plan(snap, primary, membership.front(c.store.clocks), cfg.workers, overdue)
    c.adopt_members(view)
    if write is None:
        return
    rec, changes = write
    won = yield from c.ecall(lambda: c.etcd.cas(record_key(cfg), snap.revision, encode(rec),
                                                also_compare=joined_still_registered(cfg, snap, changes)))
    if won:
        for ch in changes:
            c.emit(*change_event(ch, c.name))
        c.adopt_members(rec)
