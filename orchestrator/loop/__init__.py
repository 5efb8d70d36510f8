"""The loop's pure decisions: plan a step, prepare it, fit its context, repair its
calls, fork and replay a run. No I/O."""
