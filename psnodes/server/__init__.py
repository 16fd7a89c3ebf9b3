"""One shard copy's server: the node and its roles, the gRPC servicer, ownership of keys under elastic shards, metrics and logs."""
