#!/usr/bin/env bash
# demo.sh: set up, build (building the examples is their proof), walk through tutorial 000 and
# write its page (build-demo/pages/illustrated.html), saying how to open it.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
# its own build folder, without the test suite (scripts/test.sh builds that)
if [ ! -f build-demo/build.ninja ]; then
  CXX=g++ meson setup build-demo -Dtests=false >/dev/null
fi
steps=$(ninja -C build-demo -n 2>/dev/null | grep -c '^\[' || true)
if [ "$steps" -gt 0 ]; then
  echo "building the examples and the qkv tool in build-demo/ ($steps steps; the compiler checks every proof,"
  echo "so this takes minutes: about 3 on a 2-core machine (190 s measured beside another build), less with a warm ccache)"
else
  echo "build-demo/ is up to date (the examples compiled, so every proof held)"
fi
# ninja's own [n/m] lines, each with the time so far and a rough estimate of the rest (the
# elapsed time per step so far times the steps left: the steps differ, so it is only a guide);
# a compiler's message passes through as it is
start=$(date +%s)
meson compile -C build-demo 2>&1 | while IFS= read -r line; do
  if [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]]; then
    n=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]} what=${BASH_REMATCH[3]}
    t=$(( $(date +%s) - start ))
    if (( n >= 3 && t > 0 )); then
      printf '  [%d/%d] %3ds, about %ds left: %s\n' "$n" "$m" "$t" $(( t * (m - n) / n )) "${what#Compiling C++ object }"
    else
      printf '  [%d/%d] %3ds: %s\n' "$n" "$m" "$t" "${what#Compiling C++ object }"
    fi
  elif [[ $line != ninja:\ Entering* && $line != INFO:* && -n $line ]]; then
    printf '%s\n' "$line"
  fi
done
echo "built in $(( $(date +%s) - start )) s"

echo
mkdir -p build-demo/pages
# the walkthrough on stdout, then "wrote build-demo/pages/illustrated.html (open file://... in a browser)"
./build-demo/tools/qkv explain illustrated --html build-demo/pages/illustrated.html
echo
echo "Proven at compile time (each example built, so every static_assert in it held):"
for exe in build-demo/examples/[0-9][0-9]*_*; do
  if [ -f "$exe" ] && [ -x "$exe" ]; then
    echo "  examples/$(basename "$exe").cpp"
  fi
done
echo "Each example has a page in docs/examples/; 'build-demo/tools/qkv explain NAME' prints its walkthrough"
echo "and 'build-demo/tools/qkv explain NAME --html FILE' writes its page"
echo "(the names: $(./build-demo/tools/qkv explain 2>&1 | sed 's/.*the examples are: //'))"
echo
echo "The page of tutorial 000 (hover, click or tab to any number for how it was computed):"
echo "  file://$(pwd)/build-demo/pages/illustrated.html"
