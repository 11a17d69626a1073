#!/bin/bash
# Mutation grading of the agent's tests against the module in /app (see mutation.js); it
# writes /logs/verifier/reward.json itself.
cd /app
node /tests/mutation.js
exit $?
