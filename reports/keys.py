"""What identifies an operation and a request in a history, as the checkers read it.

A restarted worker counts its op ids and request ids from 1 again, and one request id goes to
every shard, so a bare `op_id` or a (worker, req_id) pair names several operations. The harness
keys them as `harness/checkers/base.py` does (`op_key`: process and op id; `idem`: worker and
incarnation); reports may not import the harness (they read histories and verdicts only), so
the same rules are re-derived here from the history's own fields, and a unit test holds the two
in agreement.
"""
from __future__ import annotations


def op_key(e: dict) -> tuple:
    """Pairs an invoke with its completion: the op id within its process."""
    return (e.get("pid"), e.get("op_id"))


def request_key(v: dict) -> tuple:
    """One push request: worker, incarnation (a restarted worker is a new one), request id, shard."""
    return (v.get("worker"), v.get("incarnation", 0), v.get("req_id"), v.get("shard"))
