"""Operations: liveness and readiness probes, worker heartbeats and Prometheus metrics."""
