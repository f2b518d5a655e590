"""The Wyoming server: connections, the protocol handler, Info, zeroconf, the health check."""
