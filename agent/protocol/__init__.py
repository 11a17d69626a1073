"""The agent protocol: threads, turns, items and the events that stream them.

Defined once, here, as pydantic models; the HTTP (SSE) and LSP transports carry exactly this
JSON, and the trace store persists it. Modules: `common` (shared types, approval policy),
`items` (items and deltas), `threads` (threads and turns), `events` (the event log),
`methods` (the method registry and its payloads), `schema` (the generated JSON Schema).
"""
