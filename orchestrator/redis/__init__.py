"""Reaching Redis: URLs, cluster, sentinel, the embedded in-memory Redis, and what
a Redis failure means."""
