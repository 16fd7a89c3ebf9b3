"""Which checkpoint wins, and when a primary may publish the shard's shared one.

Checkpoints compare by (term, epoch, seq): term is the epoch its writer served in, epoch that of
its last entry. The shared folder only moves forward, so a deposed primary that has not noticed
yet never overwrites the checkpoint of the epoch that took over. It publishes only as the primary
of its term with a live lease, with the seq on every ISR copy (sync mode: any copy a failover
promotes then holds it, so the checkpoint is never ahead of the shard's history), and while etcd
still names it at its term.
"""
from __future__ import annotations

from typing import Mapping

from pschaos.psnodes.core.fencing import names_me


def order(manifest: Mapping) -> tuple[int, int, int]:
    """How checkpoints compare: writer's term, epoch of the last entry, seq (older manifests carry
    no term: their epoch stands in)."""
    return (int(manifest.get("term", manifest.get("epoch", 0))), int(manifest.get("epoch", 0)),
            int(manifest["seq"]))


def keeps_current(current: Mapping | None, new: Mapping, newer_only: bool, current_file_present: bool) -> bool:
    """The folder keeps its checkpoint: `new` is not newer and the current one is intact."""
    return newer_only and current is not None and order(current) >= order(new) and current_file_present


def publish_refusal(primary_of_term: bool, lease_valid: bool, term: int) -> str:
    """Why a node may not publish now as the primary of `term` ('' if the role allows it)."""
    if not primary_of_term or not lease_valid:
        return f"not the primary of epoch {term} any more"
    return ""


def needs_replication(mode: str) -> bool:
    """Sync mode publishes only what every ISR copy applied; async mode cannot promise it."""
    return mode == "sync"


def record_refusal(record_epoch: int | None, record_primary: str | None, term: int, me: str) -> str:
    """Why the shard record in etcd forbids publishing ('' when it names us at `term`)."""
    if not names_me(record_epoch, record_primary, term, me):
        return f"the shard record names {record_primary} at epoch {record_epoch}"
    return ""
