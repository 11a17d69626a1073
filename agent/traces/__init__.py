"""Traces: the store protocol and its records (`base`); the durable SQLite store (`sqlite`),
whose writes go through `writer`; a memory store for rollouts (`memory_store`); model calls
kept as what each adds to the previous one (`records.CallChain`, `model_calls`); and the
export as training data (`export`)."""
