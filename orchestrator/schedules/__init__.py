"""Cron schedules: a run per tick, fired by whichever worker claims the tick's timer."""
