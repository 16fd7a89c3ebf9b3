"""pschaos harness: scenarios, backends, faults, history, checkers, runner and CLI."""
