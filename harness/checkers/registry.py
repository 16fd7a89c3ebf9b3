"""The checkers scenarios name in `expect.checks`."""
from pschaos.harness.checkers.acks import exactly_once, no_lost_acks
from pschaos.harness.checkers.barrier import barrier_live, staleness
from pschaos.harness.checkers.failover import failover_budget
from pschaos.harness.checkers.handoff import handoff_continuity
from pschaos.harness.checkers.lag import lag_bounded
from pschaos.harness.checkers.loads import checkpoint_loads
from pschaos.harness.checkers.primaries import single_primary
from pschaos.harness.checkers.promotion import best_promoted
from pschaos.harness.checkers.replicas import catch_up_by_delta, replicas_match
from pschaos.harness.checkers.durability import checkpoints_atomic, checkpoints_monotone, converge_baseline, losses_accounted, stops_acking
from pschaos.harness.checkers.reads import delta_complete, monotone_reads, pulled_copy_matches
from pschaos.harness.checkers.durable_acks import acks_durable, reads_committed
from pschaos.harness.checkers.spurious import no_spurious_failovers
from pschaos.harness.checkers.training import converged
from pschaos.harness.checkers.updates import counters_match, linearizable_reads, no_lost_updates
from pschaos.harness.checkers.migration import single_owner
from pschaos.harness.checkers.ownership import ownership_exact
from pschaos.harness.checkers.transparent import migration_transparent
from pschaos.harness.checkers.jobs import (for_jobs, job_exactly_once, job_no_lost_acks, lost_work_bounded,
                                           no_silent_hang, restarts_bounded, resume_exact)

CHECKERS = {
    "no-lost-acks": for_jobs(no_lost_acks, job_no_lost_acks),
    "single-primary": single_primary,
    "exactly-once": for_jobs(exactly_once, job_exactly_once),
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
    "acks-durable": acks_durable,
    "reads-committed": reads_committed,
    "lag-bounded": lag_bounded,
    "best-promoted": best_promoted,
    "checkpoint-loads": checkpoint_loads,
    "handoff-continuity": handoff_continuity,
    "ownership-exact": ownership_exact,
    "migration-transparent": migration_transparent,
    "no-spurious-failovers": no_spurious_failovers,
    "resume-exact": resume_exact,
    "lost-work-bounded": lost_work_bounded,
    "no-silent-hang": no_silent_hang,
    "restarts-bounded": restarts_bounded,
}
