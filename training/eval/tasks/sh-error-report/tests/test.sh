#!/bin/bash
# The hidden tests (a plain Python script, standard library only) against /app.
cd /app
python3 -P /tests/test_report.py
status=$?
if [ "$status" -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
exit "$status"
