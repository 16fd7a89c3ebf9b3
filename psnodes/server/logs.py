"""Logging of a node: the standard `logging` module, one line per record, to the node's log file.

A node's stderr is its log file (the harness points it there), so records go to stderr. Refused
requests are logged at DEBUG, one line each with the method, code and reason; unexpected
exceptions at ERROR with their traceback. The level comes from `--log-level` or the
PSNODES_LOG_LEVEL environment variable (default DEBUG: a chaos run wants the trace; INFO keeps
refusals out of a long-lived cluster's log).
"""
from __future__ import annotations

import logging
import os
import sys
import threading

LEVELS = ("debug", "info", "warning", "error")
FORMAT = "%(asctime)s %(levelname)s %(name)s [%(node)s] %(message)s"


def setup(node: str, level: str | None = None) -> None:
    """Route psnodes' loggers to stderr with this node's name on every line."""
    level = (level or os.environ.get("PSNODES_LOG_LEVEL") or "debug").lower()
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is unknown; use one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(_NodeName(node))
    root = logging.getLogger("psnodes")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    threading.excepthook = _log_thread_crash


def _log_thread_crash(args: threading.ExceptHookArgs) -> None:
    """A background thread (a sender, the elector) died: its traceback at ERROR, not a bare print."""
    if args.exc_type is SystemExit:
        return
    logging.getLogger("psnodes.thread").error("thread %s died", getattr(args.thread, "name", "?"),
                                              exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


class _NodeName(logging.Filter):
    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node

    def filter(self, record: logging.LogRecord) -> bool:
        record.node = self.node
        return True
