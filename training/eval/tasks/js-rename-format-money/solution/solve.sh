#!/bin/bash
# The rename: every use of the identifier, the import aliases, the namespace access, the
# docs; nothing else changes.
set -euo pipefail
cd /app
grep -rlw --include='*.js' --include='*.mjs' --include='*.md' fmtMoney . | while IFS= read -r f; do
  sed -i 's/\bfmtMoney\b/formatMoney/g' "$f"
done
