"""Each tool kind's executing half (same stems as orchestrator/tools/), and what executors share."""
