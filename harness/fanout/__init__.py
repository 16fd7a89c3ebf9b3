"""Runs fanned out beyond this machine: scenario runs as Ray tasks (ray_runs), and a Ray cluster
on this machine bound to 127.0.0.1 (local_ray)."""
