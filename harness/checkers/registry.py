"""The checkers scenarios name in `expect.checks`."""
from .acks import exactly_once, no_lost_acks
from .barrier import barrier_live, staleness
from .failover import failover_budget
from .primaries import single_primary
from .replicas import catch_up_by_delta, replicas_match
from .durability import checkpoints_atomic, checkpoints_monotone, converge_baseline, losses_accounted, stops_acking
from .reads import delta_complete, monotone_reads, pulled_copy_matches
from .spurious import no_spurious_failovers
from .training import converged
from .updates import counters_match, linearizable_reads, no_lost_updates
from .migration import single_owner

CHECKERS = {
    "no-lost-acks": no_lost_acks,
    "single-primary": single_primary,
    "exactly-once": exactly_once,
    "replicas-match": replicas_match,
    "converged": converged,
    "catch-up-by-delta": catch_up_by_delta,
    "failover-budget": failover_budget,
    "delta-complete": delta_complete,
    "pulled-copy-matches": pulled_copy_matches,
    "monotone-reads": monotone_reads,
    "staleness": staleness,
    "barrier-live": barrier_live,
    "checkpoints-atomic": checkpoints_atomic,
    "checkpoints-monotone": checkpoints_monotone,
    "stops-acking": stops_acking,
    "converge-baseline": converge_baseline,
    "losses-accounted": losses_accounted,
    "no-lost-updates": no_lost_updates,
    "counters-match": counters_match,
    "linearizable-reads": linearizable_reads,
    "single-owner": single_owner,
    "no-spurious-failovers": no_spurious_failovers,
}
