"""Elastic shards: the routing record, the migration coordinator, retired shard groups."""
