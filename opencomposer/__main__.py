"""`python -m opencomposer`: the command line, for when the `opencomposer` script is not on
PATH (an editor configured with a Python interpreter)."""

from opencomposer.serving.cli.app import main

main()
