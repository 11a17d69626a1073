#!/bin/bash
# The hidden tests against the repository in /app. -P keeps the working folder off sys.path
# (conftest.py appends /app after the installed packages); -c and --rootdir keep the
# repository's own pytest configuration out.
cd /app
python3 -P -m pytest -c /tests/pytest.ini --rootdir=/tests -q /tests
status=$?
if [ "$status" -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
exit "$status"
