"""The Wyoming server: protocol handler, Info, scheduler, sentence streaming, zeroconf, health check."""
