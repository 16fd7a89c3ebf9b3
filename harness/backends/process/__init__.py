"""The process backend: etcd, Toxiproxy, shard copies and workers as local processes on loopback."""
