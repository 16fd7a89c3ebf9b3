"""Worker membership in etcd: the records, a worker's side, and a node's watch of them."""
