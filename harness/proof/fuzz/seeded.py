"""Draw values from hypothesis strategies with a seed, outside of a test.

`@given` is a search engine, not a generator: after each fresh example it runs mutations of it
(copies of one part over another), so most of what a run sees are near-copies, and its choices
depend on max_examples. A fuzzer wants many independent requests with hypothesis's good
distributions (edge values, small sizes first, constants), so each value here is one draw from
a fresh ConjectureData whose random is seeded by (seed, index): case i depends on nothing else.

That is hypothesis's internal API, so it is looked up defensively: if it moved, the draws come
from `@given` runs seeded the same way (the second example of each run; the first is always
the simplest one), slower but still one seed, one sequence.
"""
from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from hypothesis import HealthCheck, Phase, Verbosity, given, seed as hseed, settings
from hypothesis.strategies import SearchStrategy

ATTEMPTS = 8     # a draw that runs out of room (hypothesis's choice budget) is retried with the next seed


@contextmanager
def seed_only():
    """Hypothesis (6.131 and later) mixes in constants it finds in every local module imported so
    far, so the same seed would give other values in a process that imported more (the CLI and
    a test do), or after someone edits a constant in psnodes. The seed alone must decide: the
    local pool is empty while drawing."""
    try:
        from hypothesis.internal.conjecture import providers
        real, empty = providers._get_local_constants, providers.Constants()
    except (ImportError, AttributeError):      # an older hypothesis: no local constants at all
        yield
        return
    providers.CONSTANTS_CACHE.cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = real
        providers.CONSTANTS_CACHE.cache.clear()


def _direct() -> Callable[[SearchStrategy, int], Any] | None:
    try:
        from hypothesis.control import BuildContext
        from hypothesis.errors import StopTest
        from hypothesis.internal.conjecture.data import ConjectureData
    except ImportError:
        return None

    def draw(strategy: SearchStrategy, s: int) -> Any:
        data = ConjectureData(random=random.Random(s))
        try:
            ctx = BuildContext(data, wrapped_test=None)
        except TypeError:
            ctx = BuildContext(data)
        try:
            with ctx:
                return data.draw(strategy)
        except StopTest:
            return _OVERRUN
    try:
        from hypothesis import strategies as st
        draw(st.integers(), 0)
    except Exception:  # noqa: BLE001 - the internal API changed: use @given
        return None
    return draw


def _via_given(strategy: SearchStrategy, s: int) -> Any:
    out: list = []

    @hseed(s)
    @settings(max_examples=2, database=None, derandomize=False, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, print_blob=False)
    @given(strategy)
    def collect(v: Any) -> None:
        out.append(v)

    collect()
    return out[-1] if out else _OVERRUN


_OVERRUN = object()


def draws(strategy: SearchStrategy | Callable[[int], SearchStrategy], seed_of: Callable[[int, int], int],
          n: int) -> Iterator[Any]:
    """`n` values, value i drawn from `strategy` (or `strategy(i)`) with the random seeded by
    `seed_of(i, attempt)`."""
    one = _direct() or _via_given
    pick = strategy if callable(strategy) and not isinstance(strategy, SearchStrategy) else lambda i: strategy
    with seed_only():
        for i in range(n):
            for attempt in range(ATTEMPTS):
                v = one(pick(i), seed_of(i, attempt))
                if v is not _OVERRUN:
                    break
            else:
                raise RuntimeError(f"no value drawn for index {i} in {ATTEMPTS} attempts")
            yield v
