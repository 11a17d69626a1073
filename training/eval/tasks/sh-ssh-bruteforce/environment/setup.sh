#!/bin/bash
# Eight weeks of auth logs of the fleet (logs/), deterministic: see generate.sh.
set -euo pipefail
cd /app
bash /environment/generate.sh
