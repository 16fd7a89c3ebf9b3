"""Root error of netfaults."""


class NetFaultError(Exception):
    """A proxy, toxic or nftables rule could not be made or removed; the message says which."""
