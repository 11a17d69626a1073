#!/bin/bash
# The hidden tests (plain bash) against the scripts in /app.
cd /app
bash /tests/deploy_tests.sh
status=$?
if [ "$status" -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
exit "$status"
