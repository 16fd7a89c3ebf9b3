"""psnodes' decisions, as a deterministic core: no I/O, no threads, no clocks.

The real node (gRPC, etcd, threads) and the SimPy twin are two shells around the same core: they
read their clocks, hold their locks and talk to etcd and peers, and ask the core what to do with
plain values (numbers, names, tuples, small dataclasses). A decision bug then shows on both
backends, as FoundationDB simulates its own code rather than a sketch of it. Time is always an
argument (`now`), never read here.

One concept a module: `dedup` (apply or recognise a push), `ack` (when a push may be acked),
`lease` (the etcd lease bound and failure detection), `fencing` (epochs), `isr` (in-sync replica
set changes), `promotion` (who is promoted, who restores), `logmatch` (what a peer lacks and how
to send it), `checkpoints` (which checkpoint wins, when one may be published), `gating` (BSP/SSP
clocks). tests/unit/psnodes/core/test_purity.py keeps the imports here free of I/O, threads and clocks.
"""
