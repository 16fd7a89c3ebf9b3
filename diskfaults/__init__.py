"""Storage faults: a file system with its own page cache in front of a node's data folder, so a
power cut loses exactly what a disk would (disk.py: the model; fuse_ops.py and serve.py: its FUSE
process; mounts.py: mount, cut, unmount, reap).

Knows nothing of psnodes or the harness: it sees folders, files and fsync calls.
"""
