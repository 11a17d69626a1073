#!/bin/bash
# Five days of the price service's logs (logs/): thousands of harmless lines, and the few that
# matter. Deterministic (fixed seed).
set -euo pipefail
cd /app
node /environment/generate.js
