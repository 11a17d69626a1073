#!/bin/bash
set -euo pipefail
cp -r /solution/files/. /app/
cd /app
python3 scripts/q3_revenue.py > answer.txt
