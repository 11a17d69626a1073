#!/bin/bash
set -euo pipefail
cp -r /solution/files/. /app/
cd /app
python3 tools/p95.py > answer.txt
