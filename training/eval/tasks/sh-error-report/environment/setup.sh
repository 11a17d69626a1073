#!/bin/bash
# A month of access logs of the web tier (logs/), deterministic: see generate.sh.
set -euo pipefail
cd /app
bash /environment/generate.sh
