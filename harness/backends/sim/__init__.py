"""The SimPy twin: psnodes' own core driven in virtual time, with a simulated clock, etcd and
network (DESIGN.md, "Deterministic simulation"; issue 8). Modules are imported where used, so
`import harness` stays free of SimPy."""
