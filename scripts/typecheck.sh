#!/usr/bin/env bash
# Type-checks the product packages with mypy under their import names (extra arguments go to
# mypy, e.g. --cache-dir for a second, concurrent run).
#
# The card's top-level folders (agent/, lsp/, ...) install as subpackages of `opencomposer`
# through setup.py's package-dir mapping, which mypy cannot follow (an editable install's
# import hook is invisible to it). A tree of links under the build folder gives mypy the
# layout the wheel has, so every `opencomposer.agent...` import resolves to the source.
set -euo pipefail
cd "$(dirname "$0")/.."
MYPY=${MYPY:-.venv/bin/mypy}
TREE=build/typecheck
# Rebuilt every run: a link left from a moved or deleted module would be read as a broken file.
rm -rf "$TREE"
mkdir -p "$TREE/opencomposer"
for entry in opencomposer/*.py; do
  ln -sfn "$PWD/$entry" "$TREE/opencomposer/$(basename "$entry")"
done
for init in opencomposer/*/__init__.py; do  # subpackages of the root (opencomposer/bench)
  ln -sfn "$PWD/$(dirname "$init")" "$TREE/opencomposer/$(basename "$(dirname "$init")")"
done
for folder in agent lsp serving kernels training; do
  ln -sfn "$PWD/$folder" "$TREE/opencomposer/$folder"
done
cd "$TREE"
exec "$OLDPWD/$MYPY" --config-file "$OLDPWD/pyproject.toml" "$@" -p opencomposer
