"""The Docker backend's parts, one concept a module: the engine connection (engine.py), the
locally built image (image.py), the run's containers and volumes by label (containers.py) and
GPU device requests (gpu.py). The backend itself is harness/backends/docker/backend.py."""
