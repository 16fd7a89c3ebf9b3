"""A hostile-client fuzzer for the psnodes gRPC surface (issue 15: hostile input never changes state).

cases (what to send, from one seed: random bytes, byte edits, structured requests that get past
parsing and routing, hand-written specials) -> runner (send to a running 1x3 cluster, judge each
answer by the copies' state and the nodes' logs) -> report (counts, how far requests reached into
the handlers, noise, violations with request bytes, the rerun command); session is
`pschaos fuzz`. The wire pieces: protowire (encoder with send-time placeholders),
parts/messages/replicate (hypothesis strategies), seeded (drawing them from a seed), observe
(the copies' state), nodelogs (ERROR records and tracebacks in the nodes' logs).
"""
