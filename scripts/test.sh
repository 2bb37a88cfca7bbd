#!/usr/bin/env bash
# test.sh: set up, build and pass every test. Six builds, each running the suites (tests/meson.build:
# a suite is a folder of tests/) whose result can differ in it; docs/testing.md says why:
#
#   gcc           g++ 12, -Dbench=true                     every suite
#   clang         clang++-16                               every suite but bench, browser, docs, consumers, house
#                                                            (browser_both: the editable page, both compilers)
#   gcc-asan      g++ 12, ASan + UBSan, _GLIBCXX_ASSERTIONS    core, exact, reference, io     } each suite whose
#   clang-asan    clang++-16, the same                      runtime, examples, cli, fuzz   } code runs, once
#   clang-tsan    clang++-16, ThreadSanitizer               runtime
#   clang-native  clang++-16, -march=native (AVX-512 here)  runtime
#
# What cannot differ between builds runs once: a static_assert or a compiler's message does not
# change under a sanitizer (static, compile_fail: the plain builds); each suite whose code runs is
# run under ASan + UBSan once, by one of the two compilers (an out-of-bounds read or a signed
# overflow is the code's, not the compiler's: docs/testing.md); the docs, the pages in the
# browser and the installed packages are checked in build-gcc. Each build compiles only the
# targets its suites need. -Werror in all six. Prints how long each part took, per build and
# per suite, and ends with one line: "N passed, M failed". Exits non-zero on any failure.
#   ./scripts/test.sh                               all six builds
#   QKV_COMPILERS=gcc ./scripts/test.sh             only the builds named (gcc, clang,
#   QKV_COMPILERS="gcc clang-asan" ./scripts/test.sh   gcc-asan, clang-asan, clang-tsan, clang-native)
#   QKV_SUITES="core runtime" ./scripts/test.sh     only these suites, in every build that runs them
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

all_suites="house static compile_fail core exact reference io runtime examples cli fuzz bench learner browser browser_both docs consumers"
run_suites="core exact reference io runtime examples cli fuzz"  # the suites whose code runs
# ... each sanitized by one compiler: the runtime kernels and the tool that runs them under
# clang (g++'s ASan code runs them 3-5x slower: runtime attention 114 s against 20 s), the rest
# under g++, so that the two sanitizer builds take about the same time
gcc_asan_suites="core exact reference io"
clang_asan_suites="runtime examples cli fuzz"

# Every build: -Werror on top of the project's warning_level=3 (-Wall -Wextra -Wpedantic).
# The sanitizer builds add ASan + UBSan, which stops at its first report (without
# -fno-sanitize-recover it prints and the test passes), and libstdc++'s checked operator[] and
# friends. g++ gives false -Wmaybe-uninitialized reports inside Boost.Multiprecision's cpp_int
# when ASan instruments it, so gcc-asan turns that one warning off; build-gcc keeps it.
# -g1 (after meson's -g, so it wins): line tables only, enough for a sanitizer's or a debugger's
# file:line, and 14% less compile time than full debug info (measured on a runtime test)
plain_options=(-Dwerror=true -Dcpp_args=-g1)
# -O1 in the ASan builds, as sanitizers are usually run: g++ compiles a runtime test 43% faster
# than at -O2 (runtime/attention_test.cpp: 78 -> 45 CPU-s) and the instrumented code still inlines
# -Dkernels=false in the sanitizer builds: libqkv_kernels (two compilations of src/kernels.cpp,
# its test's two header-only references) is checked in the plain builds; here the tool and the
# examples are header-only, which is the code the library compiles
sanitize_options=(-Dwerror=true -Doptimization=1 -Db_sanitize=address,undefined -Db_lundef=false -Dkernels=false)
sanitize_cpp_args="-D_GLIBCXX_ASSERTIONS -fno-sanitize-recover=all -g1"
# ThreadSanitizer: a data race or a misuse of a mutex ends the test with a report (halt_on_error)
tsan_options=(-Dwerror=true -Db_sanitize=thread -Db_lundef=false -Dkernels=false "-Dcpp_args=-D_GLIBCXX_ASSERTIONS -g1")
# the runtime path for this CPU (-march=native): the builds above target AVX2 + FMA, and
# libstdc++'s simd takes other code paths (and clang other bugs) on AVX-512
native_options=(-Dwerror=true -Dsimd_arch=native -Dcpp_args=-g1)

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
    gcc) options+=(-Dbench=true); suites=$all_suites ;;  # the benchmarks built (and started) once
    # browser_both: the editable page in chromium against this compiler's tool (issue 30: both
    # compilers' builds; about 12 s beside the other tests)
    clang) suites="static compile_fail learner browser_both $run_suites" ;;
    gcc-asan)
      options=("${sanitize_options[@]}" "-Dcpp_args=$sanitize_cpp_args -Wno-maybe-uninitialized")
      suites=$gcc_asan_suites ;;
    clang-asan)
      options=("${sanitize_options[@]}" "-Dcpp_args=$sanitize_cpp_args")
      suites=$clang_asan_suites ;;
    clang-tsan) options=("${tsan_options[@]}"); suites=runtime ;;
    clang-native) options=("${native_options[@]}"); suites=runtime ;;
  esac
  if [ -n "${QKV_SUITES:-}" ]; then  # only the suites asked for, of those this build runs
    wanted_suites=""
    for s in $suites; do
      case " $QKV_SUITES " in *" $s "*) wanted_suites="$wanted_suites $s" ;; esac
    done
    suites=${wanted_suites# }
    [ -z "$suites" ] && continue
  fi
  case $b in
    *-asan)
      test_env=(QKV_TEST_SAMPLE=small
                ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1
                UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
      test_args=(--timeout-multiplier 3) ;;
    *-tsan)
      test_env=(QKV_TEST_SAMPLE=small TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1)
      test_args=(--timeout-multiplier 3) ;;
  esac
  dir=build-$b
  start=$SECONDS
  echo "== $b ($cxx${options:+, ${options[*]}}): configure, build and test in $dir; suites: $suites"
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
  # the files of the targets the selected suites' tests run or name (meson introspect: a test's
  # executable and the build targets among its arguments), so that a build compiles nothing else;
  # build.ninja first, so that a meson.build changed since the last build is read again
  ninja -C "$dir" build.ninja >/dev/null ||
    { echo "test.sh: meson could not read the build files again ($b)"; failed=$((failed + 1)); status=1; continue; }
  mapfile -t outputs < <(meson introspect "$dir" --tests --targets | python3 -c '
import json, os, sys
info = json.load(sys.stdin)
suites = set(sys.argv[1].split())
ids = set()
for t in info["tests"]:
    if any(s.split(":")[-1] in suites for s in t["suite"]):
        ids.update(t.get("depends", []))
for t in info["targets"]:
    if t["id"] in ids:
        for f in t["filename"]:
            print(os.path.relpath(f, sys.argv[2]))' "$suites" "$(cd "$dir" && pwd)")
  echo "== $b: building the ${#outputs[@]} targets the suites need"
  if ! ninja -C "$dir" -j 2 "${outputs[@]}"; then
    echo "test.sh: build failed ($b)"
    failed=$((failed + 1)); status=1
    timings+=("$(printf '%-12s build FAILED after %4d s' "$b" $((SECONDS - start)))")
    continue
  fi
  t_build=$((SECONDS - start - t_setup))
  suite_args=()
  for s in $suites; do suite_args+=(--suite "$s"); done
  env "${test_env[@]}" meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 "${test_args[@]}" \
    "${suite_args[@]}" | tee "$dir/test-summary.txt"
  test_status=${PIPESTATUS[0]}
  [ "$test_status" -eq 0 ] || status=1
  t_test=$((SECONDS - start - t_setup - t_build))
  ok=$(awk '/^Ok:/ {print $2}' "$dir/test-summary.txt")
  bad=$(awk '/^(Fail|Unexpected Pass|Timeout):/ {n += $NF} END {print n + 0}' "$dir/test-summary.txt")
  # meson test failing before any test ran (a test program missing, say) counts as a failure
  [ "$test_status" -ne 0 ] && [ "${bad:-0}" -eq 0 ] && bad=1
  passed=$((passed + ${ok:-0}))
  failed=$((failed + ${bad:-0}))
  # each suite's share of the test time: the sum of its tests' durations (two run at once)
  per_suite=$(python3 -c '
import collections, json, sys
d = collections.Counter()
for line in open(sys.argv[1]):
    t = json.loads(line)
    d[t["name"].split(" / ")[0].split(":")[-1]] += t["duration"]  # "qkv:SUITE / test name"
print(", ".join("%s %.0f" % kv for kv in sorted(d.items(), key=lambda kv: -kv[1])))' "$dir/meson-logs/testlog.json" 2>/dev/null)
  echo "== $b: ${ok:-0} passed, ${bad:-0} failed in $((SECONDS - start)) s"
  timings+=("$(printf '%-12s %4d s  (configure %3d s, build %4d s, test %4d s): %s passed, %s failed' \
    "$b" $((SECONDS - start)) "$t_setup" "$t_build" "$t_test" "${ok:-0}" "${bad:-0}")")
  timings+=("$(printf '%-12s test seconds per suite: %s' '' "$per_suite")")
done

echo "== time per build:"
for t in "${timings[@]}"; do echo "   $t"; done
echo "   total        $((SECONDS - total_start)) s"
echo "$passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
