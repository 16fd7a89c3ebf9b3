"""pschaos: a fault-tolerance test harness and chaos simulator for distributed training clusters.

Everything installs under this one name (pschaos.harness, pschaos.psnodes, pschaos.netfaults,
pschaos.diskfaults, pschaos.reports), so a user's own `harness/` or `reports/` package never shadows ours.

This file runs before the command line can install its Ctrl-C handler, so it imports nothing
that the interpreter has not loaded already (`os` has): a SIGINT in its first milliseconds must
land in CPython's start-up, not in a traceback of ours.
"""
import os as _os

# In a source checkout (and in selftest's mutant copies of it) harness/, psnodes/, netfaults/ and
# reports/ stand beside this folder, not inside it as in an installed wheel: look there too, so
# that the checkout on PYTHONPATH is the package, with or without an editable install.
_here = _os.path.dirname(_os.path.abspath(__file__))
_beside = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "harness")) and _os.path.isfile(_os.path.join(_beside, "harness", "__init__.py")):
    __path__.append(_beside)


def __getattr__(name: str) -> str:
    """`pschaos.__version__`, read from the installed metadata when asked (importlib.metadata
    costs tens of milliseconds of imports that a run does not need)."""
    if name != "__version__":
        raise AttributeError(f"module 'pschaos' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pschaos")
    except PackageNotFoundError:          # a checkout on PYTHONPATH without an install
        return "0+unknown"
