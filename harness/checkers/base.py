"""Three-valued verdicts, as in Jepsen's checker: True, False, or "unknown" (could not decide).

A checker that raises yields "unknown" with the error: a crash is never a pass.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

Valid = bool | Literal["unknown"]


@dataclass
class Verdict:
    valid: Valid
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"valid": self.valid, "details": self.details}


def worst(a: Valid, b: Valid) -> Valid:
    if a is False or b is False:
        return False
    if a == "unknown" or b == "unknown":
        return "unknown"
    return True


def compose(verdicts: dict[str, Verdict]) -> Valid:
    out: Valid = True
    for v in verdicts.values():
        out = worst(out, v.valid)
    return out


def run_check(fn: Callable[[list[dict], dict], Verdict], history: list[dict], ctx: dict) -> Verdict:
    try:
        return fn(history, ctx)
    except Exception as e:  # noqa: BLE001 - a crash must become "unknown", never a pass
        return Verdict("unknown", {"error": f"{e.__class__.__name__}: {e}",
                                   "trace": traceback.format_exc(limit=3)})


def by_f(history: list[dict], f: str, type_: str | None = None) -> list[dict]:
    return [e for e in history if e.get("f") == f and (type_ is None or e.get("type") == type_)]


def final_states(history: list[dict]) -> list[dict]:
    return [e["value"] for e in by_f(history, "final-state")]
