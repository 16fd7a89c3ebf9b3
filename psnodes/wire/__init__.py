"""What goes over the wire: gRPC channel options, message encoding and decoding, per-request limits and the RPC bulkhead."""
