#!/bin/sh
# Install tests/openapi's npm packages from package-lock.json (`npm ci`), unless node_modules
# already holds what the lockfile says (npm writes node_modules/.package-lock.json as it
# installs; a lockfile changed since makes it run again). Used by lint.sh and by
# tests/integration/test_openapi.py. node and npm come from scripts/deps.sh (the test set).
set -eu
cd "$(dirname "$0")"
done=node_modules/.package-lock.json
if [ -f "$done" ] && [ "$done" -nt package-lock.json ]; then
    exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
