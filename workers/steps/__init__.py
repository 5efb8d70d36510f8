"""The worker side of a model step: preparation, repair, streaming, span attributes."""
