"""pschaos reports: the report model and its renderings (reads histories and verdicts only)."""
