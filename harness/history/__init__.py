"""The run's record and its time base: the append-only history of operations and faults, and the Clock every part asks."""
