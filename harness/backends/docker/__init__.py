"""The Docker backend's parts, one concept a module: the engine connection (engine.py), the
image (plan.py chooses it; build.py, debian.py and wheel.py build the self-contained one;
image.py is the bind-mounted skeleton), the run's containers and volumes by label (containers.py) and
GPU device requests (gpu.py). The backend itself is harness/backends/docker/backend.py."""
