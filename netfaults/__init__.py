"""Network faults: a Toxiproxy proxy on every directed link, nftables rules on their ports.

Knows nothing of psnodes internals: it sees node names, addresses and ports.
"""
