"""pschaos: a fault-tolerance test harness and chaos simulator for distributed training clusters.

Everything installs under this one name (pschaos.harness, pschaos.psnodes, pschaos.netfaults,
pschaos.reports), so a user's own `harness/` or `reports/` package never shadows ours.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("pschaos")
except PackageNotFoundError:          # a checkout on PYTHONPATH without an install
    __version__ = "0+unknown"

# In a source checkout (and in selftest's mutant copies of it) harness/, psnodes/, netfaults/ and
# reports/ stand beside this folder, not inside it as in an installed wheel: look there too, so
# that the checkout on PYTHONPATH is the package, with or without an editable install.
from pathlib import Path as _Path

_here = _Path(__file__).resolve().parent
if not (_here / "harness").is_dir() and (_here.parent / "harness" / "__init__.py").is_file():
    __path__.append(str(_here.parent))
