"""The tool harness: search, read, edit, terminal and todo tools over a confined workspace
and a sandbox, one implementation for editor sessions, HTTP sessions, the CLI and RL
rollouts. `harness.ToolHarness` is the entry point; `registry.default_tools` the tool set.
"""
