"""A shard's state: the versioned store, embedding tables, optimizers, the update log, applied keys, state blobs and checkpoints."""
