"""Replication and failover: primary-to-replica senders, failure detection and promotion, a replica's probe of its primary."""
