#!/bin/bash
set -euo pipefail
cp -r /solution/files/. /app/
