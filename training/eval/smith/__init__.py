"""Benchmark tasks made from real repositories: SWE-smith's procedural bugs in pinned PyPI
sdists (`generate`), and SWE-bench instances for repositories a user has (`swebench_import`)."""
