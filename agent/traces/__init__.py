"""Traces: the SQLite trace store (`store`) and its export as training data (`export`)."""
