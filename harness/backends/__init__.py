"""Where a cluster runs: the Backend protocol, the cluster spec every backend takes, and the process, docker and sim (twin) backends; adapters put systems we did not write under the same chaos."""
