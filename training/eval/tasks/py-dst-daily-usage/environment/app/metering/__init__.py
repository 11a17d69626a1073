"""Per-customer daily metering: local calendar days, hourly buckets, daily charges."""
