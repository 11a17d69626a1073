#!/bin/bash
# The hidden check (a plain Python script, standard library only) against /app.
cd /app
python3 -P /tests/test_answer.py
status=$?
if [ "$status" -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
exit "$status"
