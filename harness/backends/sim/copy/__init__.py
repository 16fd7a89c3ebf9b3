"""A simulated shard copy (psnodes/server/node.py's second shell, in virtual time), in one direction:
copy.py's SimCopy owns its sides (process control, the Replicate handler, checkpoints, Migrate),
procs.py is serve.py around it (replication manager, elector, membership watch), and every side
sees the copy only as state.py's protocol, so none imports the module that defines it."""
