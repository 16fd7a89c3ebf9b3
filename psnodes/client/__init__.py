"""The PS client workers use, and its shared watch of shard records."""
