#!/usr/bin/env bash
# test.sh: set up, build and pass every test, with g++ and with clang++-16 (two build folders).
# The last line counts both: "N passed, M failed". Exits non-zero on any failure.
#   ./scripts/test.sh            both compilers
#   QKV_COMPILERS=gcc ./scripts/test.sh   one of them (gcc or clang)
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh || exit 1

compilers=${QKV_COMPILERS:-"gcc clang"}
passed=0
failed=0
status=0

for c in $compilers; do
  case $c in
    gcc)   cxx=g++ ;;
    clang) cxx=clang++-16 ;;
    *) echo "test.sh: unknown compiler '$c' (gcc or clang)" >&2; exit 2 ;;
  esac
  dir=build-$c
  start=$SECONDS
  echo "== $c ($cxx): configure, build and test in $dir"
  if [ ! -f "$dir/build.ninja" ]; then
    CXX=$cxx meson setup "$dir" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; echo "test.sh: meson setup failed ($c)"; failed=$((failed + 1)); status=1; continue; }
    rm -f "$dir.setup.log"
  fi
  if ! meson compile -C "$dir"; then
    echo "test.sh: build failed ($c)"
    failed=$((failed + 1)); status=1; continue
  fi
  meson test -C "$dir" --print-errorlogs --num-processes 2 | tee "$dir/test-summary.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  ok=$(awk '/^Ok:/ {print $2}' "$dir/test-summary.txt")
  bad=$(awk '/^(Fail|Unexpected Pass|Timeout):/ {n += $NF} END {print n + 0}' "$dir/test-summary.txt")
  passed=$((passed + ${ok:-0}))
  failed=$((failed + ${bad:-0}))
  echo "== $c: ${ok:-0} passed, ${bad:-0} failed in $((SECONDS - start)) s"
done

echo "$passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
