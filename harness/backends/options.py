"""A system's own settings (a scenario's `system_options`): typed, defaulted, named on error.

Shared by adapters (api.py) and training jobs (backends/jobs/api.py), which both declare
`options = {name: (type, default)}`.
"""
from __future__ import annotations

from difflib import get_close_matches
from typing import Any, ClassVar


class OptionsMixin:
    name: ClassVar[str] = ""
    options: ClassVar[dict[str, tuple[type, Any]]] = {}

    @classmethod
    def check_options(cls, given: dict[str, Any]) -> dict[str, Any]:
        """A scenario's `system_options` with defaults filled in; ValueError naming
        `system_options.<name>`, what is wrong and the fix."""
        unknown = sorted(set(given) - set(cls.options))
        if unknown:
            near = {u: get_close_matches(u, list(cls.options), 1) for u in unknown}
            hint = "; ".join(f"{u}: did you mean {m[0]}?" for u, m in near.items() if m)
            raise ValueError(f"system_options: {cls.name} has no option {', '.join(unknown)}"
                             + (f" ({hint})" if hint else "") + f"; its options: {', '.join(sorted(cls.options)) or 'none'}")
        out = {}
        for name, (typ, default) in cls.options.items():
            v = given.get(name, default)
            if typ is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if not isinstance(v, typ) or (isinstance(v, bool) and typ is not bool):
                raise ValueError(f"system_options.{name}: {v!r} is not a {typ.__name__}; give a {typ.__name__} "
                                 f"(default {default!r})")
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                raise ValueError(f"system_options.{name}: {v!r} is negative; give a value >= 0")
            out[name] = v
        return out

