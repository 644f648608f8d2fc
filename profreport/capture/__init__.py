"""Collection: everything that runs the model (profiler traces, tensor I/O log, latency)."""
