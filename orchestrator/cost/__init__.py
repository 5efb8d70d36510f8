"""Cost: the deployment's price table and what a step's tokens cost at it, pure."""
