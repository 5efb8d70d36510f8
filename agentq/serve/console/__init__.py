"""What the dashboard reads that no other door needs: the queue depths over time, a
tenant's active concurrency keys."""
