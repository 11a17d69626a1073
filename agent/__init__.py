"""The agent runtime: the protocol of threads, turns and items, the run loop, context and
self-summarization, approvals, the trace store, and the tool harness (`agent.tools`).

Knows models only through `opencomposer.serving.engines.base`; never imports a transport
(lsp, serving.http, serving.cli) or training.
"""
