"""What the fleet looks like from Redis: workers alive, what they serve, queue depths."""
