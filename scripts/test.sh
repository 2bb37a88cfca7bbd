#!/usr/bin/env bash
# test.sh: set up, build and pass every test: with g++ and clang++-16 (build-gcc, build-clang),
# and again with both under AddressSanitizer + UndefinedBehaviorSanitizer and
# -D_GLIBCXX_ASSERTIONS (build-gcc-asan, build-clang-asan); then the runtime path's tests (meson
# suite 'runtime_path': every test of include/qkv/runtime/) under ThreadSanitizer with clang++-16 and
# -D_GLIBCXX_ASSERTIONS (build-clang-tsan), which compiles only those test binaries, not the
# constexpr proofs, examples or tool; and the same suite built by clang++-16 for the CPU it runs
# on (build-clang-native, -Dsimd_arch=native: AVX-512 where the machine has it), because the
# default builds target AVX2 + FMA and libstdc++'s simd takes other code paths on AVX-512.
# -Werror in all six. Prints how long each part took.
# The last line counts all builds: "N passed, M failed". Exits non-zero on any failure.
#   ./scripts/test.sh                               all six builds
#   QKV_COMPILERS=gcc ./scripts/test.sh             only the builds named (gcc, clang,
#   QKV_COMPILERS="gcc clang-asan" ./scripts/test.sh   gcc-asan, clang-asan, clang-tsan, clang-native)
# In the sanitizer and TSan builds the tests see QKV_TEST_SAMPLE=small: a slow sweep may then check a
# smaller sample, and says so in its output. Meson's per-test timeouts are tripled there.
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh || exit 1

builds=${QKV_COMPILERS:-"gcc clang gcc-asan clang-asan clang-tsan clang-native"}
passed=0
failed=0
status=0
timings=()
total_start=$SECONDS

# Every build: -Werror on top of the project's warning_level=3 (-Wall -Wextra -Wpedantic).
# The sanitizer builds add ASan + UBSan, which stops at its first report (without
# -fno-sanitize-recover it prints and the test passes), and libstdc++'s checked operator[] and
# friends. g++ gives false -Wmaybe-uninitialized reports inside Boost.Multiprecision's cpp_int
# when ASan instruments it, so gcc-asan turns that one warning off; build-gcc keeps it.
plain_options=(-Dwerror=true)
sanitize_options=(-Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false)
sanitize_cpp_args="-D_GLIBCXX_ASSERTIONS -fno-sanitize-recover=all"
# ThreadSanitizer: a data race or a misuse of a mutex ends the test with a report
# (halt_on_error); only the suite 'runtime_path' is built and run there
tsan_options=(-Dwerror=true -Db_sanitize=thread -Db_lundef=false "-Dcpp_args=-D_GLIBCXX_ASSERTIONS")
# The runtime path for this CPU (-march=native), clang++-16: only the suite 'runtime_path' (the
# runtime path's tests). g++ -march=native is what ./scripts/bench.sh builds and measures.
native_options=(-Dwerror=true -Dsimd_arch=native)

for b in $builds; do
  case $b in
    gcc | gcc-asan) cxx=g++ ;;
    clang | clang-asan | clang-tsan | clang-native) cxx=clang++-16 ;;
    *) echo "test.sh: unknown build '$b' (gcc, clang, gcc-asan, clang-asan, clang-tsan or clang-native)" >&2; exit 2 ;;
  esac
  options=("${plain_options[@]}")
  test_env=()
  test_args=()
  case $b in
    gcc-asan) options=("${sanitize_options[@]}" "-Dcpp_args=$sanitize_cpp_args -Wno-maybe-uninitialized") ;;
    clang-asan) options=("${sanitize_options[@]}" "-Dcpp_args=$sanitize_cpp_args") ;;
    clang-tsan) options=("${tsan_options[@]}") ;;
    clang-native) options=("${native_options[@]}") ;;
  esac
  targets=()
  test_selection=()
  case $b in
    *-asan)
      test_env=(QKV_TEST_SAMPLE=small
                ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1
                UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
      test_args=(--timeout-multiplier 3)
      ;;
    *-tsan)
      test_env=(QKV_TEST_SAMPLE=small TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1)
      test_args=(--timeout-multiplier 3)
      test_selection=(--no-rebuild --suite runtime_path)
      ;;
    *-native)
      test_selection=(--no-rebuild --suite runtime_path)
      ;;
  esac
  dir=build-$b
  start=$SECONDS
  echo "== $b ($cxx${options:+, ${options[*]}}): configure, build and test in $dir"
  [ ${#test_env[@]} -gt 0 ] && echo "== $b: the tests run with ${test_env[*]} (slow sweeps that honour QKV_TEST_SAMPLE check a smaller sample and say so)"
  # a folder set up by test.sh with other options is set up again; one set up by hand (or by an
  # older test.sh) is reconfigured with these options
  wanted="$cxx ${options[*]}"
  if [ -f "$dir/qkv-test-options" ] && [ "$(cat "$dir/qkv-test-options")" != "$wanted" ]; then
    echo "== $b: $dir was set up with other options; setting it up again"
    rm -rf "$dir"
  fi
  if [ ! -f "$dir/build.ninja" ]; then
    rm -rf "$dir"
    CXX=$cxx meson setup "$dir" "${options[@]}" >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log"; echo "test.sh: meson setup failed ($b)"; failed=$((failed + 1)); status=1; continue; }
    rm -f "$dir.setup.log"
  elif [ ! -f "$dir/qkv-test-options" ]; then
    meson setup --reconfigure "$dir" "${options[@]}" >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log"; echo "test.sh: meson setup --reconfigure failed ($b)"; failed=$((failed + 1)); status=1; continue; }
    rm -f "$dir.setup.log"
  fi
  echo "$wanted" >"$dir/qkv-test-options"
  t_setup=$((SECONDS - start))
  if [ ${#test_selection[@]} -gt 0 ]; then
    # the executables of the suite's tests, by target name
    mapfile -t targets < <(meson introspect "$dir" --tests | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if any(s.split(":")[-1] == "runtime_path" for s in t["suite"]):
        print(os.path.basename(t["cmd"][0]))')
    echo "== $b: building the ${#targets[@]} test binaries of suite runtime_path: ${targets[*]}"
  fi
  if ! meson compile -C "$dir" -j 2 "${targets[@]}"; then
    echo "test.sh: build failed ($b)"
    failed=$((failed + 1)); status=1
    timings+=("$(printf '%-11s build FAILED after %4d s' "$b" $((SECONDS - start)))")
    continue
  fi
  t_build=$((SECONDS - start - t_setup))
  env "${test_env[@]}" meson test -C "$dir" --print-errorlogs --num-processes 2 "${test_args[@]}" "${test_selection[@]}" |
    tee "$dir/test-summary.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  t_test=$((SECONDS - start - t_setup - t_build))
  ok=$(awk '/^Ok:/ {print $2}' "$dir/test-summary.txt")
  bad=$(awk '/^(Fail|Unexpected Pass|Timeout):/ {n += $NF} END {print n + 0}' "$dir/test-summary.txt")
  passed=$((passed + ${ok:-0}))
  failed=$((failed + ${bad:-0}))
  echo "== $b: ${ok:-0} passed, ${bad:-0} failed in $((SECONDS - start)) s"
  timings+=("$(printf '%-11s %4d s  (configure %3d s, build %4d s, test %4d s): %s passed, %s failed' \
    "$b" $((SECONDS - start)) "$t_setup" "$t_build" "$t_test" "${ok:-0}" "${bad:-0}")")
done

echo "== time per build:"
for t in "${timings[@]}"; do echo "   $t"; done
echo "   total       $((SECONDS - total_start)) s"
echo "$passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
