#!/bin/sh
# `make openapi-lint`: docs/openapi.yaml through Redocly's linter (@redocly/cli, pinned in
# package-lock.json) with the rules of redocly.yaml. Any error or warning fails.
set -eu
cd "$(dirname "$0")"
sh ./npm-ci.sh
report=$(mktemp)
trap 'rm -f "$report"' EXIT
# the JSON report's totals decide; the human-readable one is printed when they say no
npx --no-install redocly lint ../../docs/openapi.yaml --format=json >"$report" 2>/dev/null || true
if node -e '
    const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).totals;
    console.log(`openapi-lint: docs/openapi.yaml: ${t.errors} errors, ${t.warnings} warnings, ${t.ignored} ignored (redocly.yaml)`);
    process.exit(t.errors === 0 && t.warnings === 0 ? 0 : 1);
' "$report"; then
    exit 0
fi
npx --no-install redocly lint ../../docs/openapi.yaml || true
exit 1
