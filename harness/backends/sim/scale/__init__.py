"""The scale level of the twin: clusters of thousands of workers and hundreds of shards.

The per-RPC twin (harness/backends/sim/backend.py) runs psnodes' own code message by message, which tops
out at a few thousand simulated steps a second. This level keeps discrete events only for what
changes a cluster's shape — a node failing or coming back, a failover, a catch-up, a restore —
and advances the training steps between two events in one vectorized stroke (numpy over the
workers). Every failover goes through psnodes' decision core (psnodes/core: who is promoted,
whether the ISR may shrink, when an orphaned shard restores and from what), and every timing
comes from the same calibration file as the per-RPC twin.
"""
