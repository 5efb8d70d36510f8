"""Batches: many runs from input lines, admitted by the fleet itself."""
