#!/bin/sh
# `make lint`: the source tree as the formatter and the layers want it. Run by `make test`.
#
#   clang-format  every C file (src/, tests/unit, tests/tools, tests/fuzz, bench) is exactly
#                 what the repo's .clang-format makes of it, with Debian 12's clang-format 14
#                 (pinned: another major version formats some constructs differently, so a
#                 tree clean under one can drift under another). `make format` fixes drift.
#   layers        src/ keeps its layers (scripts/layers.py: includes by path, only downwards,
#                 and docs/architecture.md's diagram drawn from the folders).
set -eu
cd "$(dirname "$0")/.."

want_major=14
if ! command -v clang-format >/dev/null 2>&1; then
    echo "lint: clang-format is missing (scripts/deps.sh test installs Debian's clang-format $want_major)" >&2
    exit 1
fi
version=$(clang-format --version)
case "$version" in
    *"clang-format version $want_major."*) ;;
    *)
        echo "lint: clang-format $want_major is pinned (Debian 12's); this one says: $version" >&2
        exit 1
        ;;
esac

files=$(ls src/*/*.c src/*/*.h tests/unit/*.c tests/unit/*.h tests/tools/*.c tests/fuzz/*.c tests/fuzz/*.h \
    bench/*.c bench/*.h 2>/dev/null)
drift=""
for f in $files; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
        drift="$drift $f"
    fi
done
if [ -n "$drift" ]; then
    n=$(echo $drift | wc -w)
    echo "lint: $n files drift from .clang-format (run make format):" >&2
    for f in $drift; do
        clang-format --dry-run "$f" 2>&1 | head -3 >&2
    done
    exit 1
fi
echo "lint: $(echo $files | wc -w) files formatted as .clang-format says (clang-format $want_major)"

python3 scripts/layers.py >/dev/null
echo "lint: src/ keeps its layers"
