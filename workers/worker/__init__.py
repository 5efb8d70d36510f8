"""The worker process: runtime, liveness, health, metrics, webhook delivery, loading."""
