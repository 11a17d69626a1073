"""The benchmarks behind `opencomposer bench ...` and `opencomposer engine bench`: commands
beside the product, not modules inside it. Each module measures one part (the tools, the agent
runtime, the sandbox's limits, HTTP, the language server, the embedded engine) against a
baseline in the same run and returns `rows.Row`s; `report` prints them.

Only the CLI's bench commands and the tests import this package; no product module does, so
the product never loads benchmark code (or its baselines' dependencies) by accident.
"""
