#!/usr/bin/env bash
# demo.sh: set up, build (building the examples is their proof) and walk through tutorial 000.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
# its own build folder, without the test suite (scripts/test.sh builds that)
if [ ! -f build-demo/build.ninja ]; then
  CXX=g++ meson setup build-demo -Dtests=false >/dev/null
fi
echo "building the examples and the qkv tool (the compiler checks every proof)..."
meson compile -C build-demo >/dev/null

echo
./build-demo/tools/qkv explain illustrated
echo
echo "Proven at compile time (each example built, so every static_assert in it held):"
for exe in build-demo/examples/[0-9][0-9]*_*; do
  if [ -f "$exe" ] && [ -x "$exe" ]; then
    echo "  examples/$(basename "$exe").cpp"
  fi
done
echo "Each example has a page in docs/examples/; 'build-demo/tools/qkv explain NAME' prints its walkthrough"
echo "(the names: $(./build-demo/tools/qkv explain 2>&1 | sed 's/.*the examples are: //'))"
