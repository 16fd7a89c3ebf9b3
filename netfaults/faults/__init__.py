"""One small class per network fault kind, registered by name (like Toxiproxy's toxics)."""
from pschaos.netfaults.faults.base import LINK_FAULTS, LinkFault, NetContext, check_params
from pschaos.netfaults.faults import bandwidth, latency, limit_data, link_down, loss, partition, reset_peer, slicer, timeout  # noqa: F401

__all__ = ["LINK_FAULTS", "LinkFault", "NetContext", "check_params"]
