#!/bin/bash
# Five months of order exports and the month's EUR rates (data/), deterministic (fixed seed).
set -euo pipefail
cd /app
node /environment/generate.js
