"""A hostile-client fuzzer for the psnodes gRPC surface (issue 15: hostile input never changes state).

cases (what to send, from one seed) -> runner (send to a running 1x3 cluster, judge each answer
by the copies' state) -> report (counts, violations with request bytes, the rerun command);
session is `pschaos fuzz`. The wire pieces: protowire (encoder with send-time placeholders),
parts/messages/replicate (hypothesis strategies), seeded (drawing them from a seed), observe
(the copies' state).
"""
