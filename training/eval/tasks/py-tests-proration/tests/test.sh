#!/bin/bash
# Mutation grading of the agent's tests against the module in /app (see mutation.py); it
# writes /logs/verifier/reward.json itself. -P keeps the working folder off sys.path.
cd /app
python3 -P /tests/mutation.py
exit $?
