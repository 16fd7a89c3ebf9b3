"""The machinery of a run on this host: child processes and their zygote, free ports, the live-run registry, the real parts (etcd, Toxiproxy) and the host's load and speed."""
