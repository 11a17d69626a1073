"""The evaluation bench: Harbor-format tasks, run by the real agent runtime and tool harness
in the sandbox, graded by a verifier in a sandbox of its own; the same tasks and graders are
the RL environments.

`task` loads and validates a task folder, `workspace` builds the starting repository,
`verifier` runs the tests after the agent is gone, `grading` applies SWE-bench's rules through
the `swebench` package, `runner` runs trials (an agent or the oracle) and records them,
`report` turns a run into pass@k tables, plots and comparisons.
"""
