#!/usr/bin/env bash
# demo.sh: set up, build (building the examples is their proof) and walk through tutorial 000.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
if [ ! -f build-gcc/build.ninja ]; then
  CXX=g++ meson setup build-gcc >/dev/null
fi
meson compile -C build-gcc >/dev/null

echo
./build-gcc/tools/qkv explain illustrated
echo
echo "Proven at compile time (each example built, so every static_assert in it held):"
for exe in build-gcc/examples/[0-9][0-9]_*; do
  if [ -f "$exe" ] && [ -x "$exe" ]; then
    echo "  examples/$(basename "$exe").cpp"
  fi
done
echo "Each example has a page in docs/examples/; 'build-gcc/tools/qkv explain NAME' prints its walkthrough."
