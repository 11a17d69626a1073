"""The engine behind the terminal tools: the commands' environment, jobs with soft timeouts
and capped output, command risk classification, and the parts of the sandbox
(`agent/tools/sandbox.py`) that say what a command sees (`view`), what it may use (`limits`)
and what it may not change in git (`git_guard`).

Nothing is re-exported here: the sandbox imports these modules, and jobs import the sandbox,
so an eager import of both from this package would be a cycle."""
