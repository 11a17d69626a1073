import sys

# The repository under test after the installed packages: a module the agent planted there
# cannot stand in for pytest or the standard library.
sys.path.append("/app")
