"""A small in-process job scheduler driven by cron expressions."""
