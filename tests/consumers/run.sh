#!/usr/bin/env bash
# run.sh: use qkv the three ways a project would, against a staged install of a qkv build.
#
#   tests/consumers/run.sh BUILD_DIR [CXX]
#
# BUILD_DIR is a configured and built qkv build folder (meson test passes its own). This
#   1. stages it: meson install --no-rebuild --destdir BUILD_DIR/consumers/stage, and checks
#      that every header of include/qkv, bin/qkv, qkv.pc, qkv-runtime.pc, qkv-io.pc and the CMake
#      package are there;
#   2. builds and runs tests/consumers/pkgconfig  (dependency('qkv') through qkv.pc, found with
#      PKG_CONFIG_PATH in the staging tree: the .pc is relocatable, prefix=${pcfiledir}/../..);
#   3. builds and runs tests/consumers/subproject (subprojects/qkv a symlink to this source
#      tree, made here), and checks that qkv built and installed nothing of its own;
#   4. builds and runs tests/consumers/cmake      (find_package(qkv) with CMAKE_PREFIX_PATH in the
#      staging tree), and checks that a missing nlohmann_json or Boost, or an unknown component,
#      fails find_package with a message that names it;
#   5. the light install: configures this source with -Dtests=false -Dexamples=false and checks
#      that only the tool, its commands, the list of examples and their stubs are to be built (no example, test or benchmark), then
#      with -Dtool=false (and -Dkernels=false) too, installs it without building anything and
#      checks the packages.
# libqkv_kernels (meson.build): where it is built, it must be installed, qkv-runtime.pc and
# qkv::runtime must link it and their extras must run its kernels (avx2 or avx512); the
# subproject's extras stay header-only.
# Each project builds consumer.cpp (the core, through qkv / qkv::qkv / qkv_dep) and extras.cpp
# (runtime/, io/ and exact/, through the packages that carry -march, nlohmann-json and Boost).
# Each consumer is copied out of the source tree first, so nothing but the package can reach
# qkv's headers. CXX (default: $CXX, else c++) compiles the consumers. Prints one line per step
# with its time; exits 1 on the first failure, after printing that step's log.
set -uo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD_DIR [CXX]" >&2
  exit 2
fi
source_root=$(cd "$(dirname "$0")/../.." && pwd)
consumers=$source_root/tests/consumers
build=$(cd "$1" && pwd) || exit 2
cxx=${2:-${CXX:-c++}}
work=$build/consumers
rm -rf "$work"
mkdir -p "$work"

step_start=$SECONDS
log=$work/step.log
# run a command, its output into the step's log
run() { "$@" >>"$log" 2>&1; }
fail() {
  echo "consumers: FAILED: $*"
  echo "---- log ($log) ----"
  cat "$log"
  exit 1
}
done_step() { echo "consumers: $1: ok ($((SECONDS - step_start)) s)"; step_start=$SECONDS; : >"$log"; }
# copy a consumer project out of the tree (-L: consumer.cpp is a symlink to ../consumer.cpp)
copy_out() { mkdir -p "$work/$1" && cp -rL "$consumers/$1" "$work/$1/src"; }

# --- 1. stage the install --------------------------------------------------------------------
stage=$work/stage
run meson install -C "$build" --no-rebuild --destdir "$stage" || fail "meson install --destdir"
# the install directories as configured (relative to the prefix unless set absolute)
read -r prefix includedir bindir datadir libdir kernels < <(meson introspect --buildoptions "$build" | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["includedir"], o["bindir"], o["datadir"], o["libdir"],
      str(o["kernels"] and o["simd_arch"] == "x86-64-v3").lower())')
# libqkv_kernels (meson.build) is built on x86-64 with -Dkernels=true and the default simd_arch
[ "$(uname -m)" = x86_64 ] || kernels=false
root=$stage$prefix
abs() { case $1 in /*) echo "$stage$1" ;; *) echo "$root/$1" ;; esac; }
inc=$(abs "$includedir")
for h in $(cd "$source_root/include" && find qkv -name '*.hpp' | sort); do
  [ -f "$inc/$h" ] || fail "header $h is not installed (expected $inc/$h)"
done
pcdir=$(abs "$datadir")/pkgconfig
cmakedir=$(abs "$datadir")/cmake/qkv
libs=$(abs "$libdir")
if [ "$kernels" = true ]; then
  for f in libqkv_kernels.so libqkv_kernels_avx512.so; do
    [ -f "$libs/$f" ] || fail "$f is not installed (expected in $libs)"
  done
  PKG_CONFIG_PATH=$pcdir pkg-config --libs qkv-runtime | grep -q -- '-lqkv_kernels' ||
    fail "qkv-runtime.pc does not link libqkv_kernels"
fi
for f in "$pcdir/qkv.pc" "$pcdir/qkv-runtime.pc" "$pcdir/qkv-io.pc" "$(abs "$datadir")/qkv/single_include/qkv.hpp" \
         "$cmakedir/qkvConfig.cmake" \
         "$cmakedir/qkvConfigVersion.cmake"; do
  [ -f "$f" ] || fail "$f is not installed"
done
version=$(meson introspect --projectinfo "$build" | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
tool_version=$("$(abs "$bindir")/qkv" --version 2>>"$log") || fail "the installed bin/qkv --version"
case $tool_version in *"$version"*) ;; *) fail "bin/qkv --version printed '$tool_version', not $version" ;; esac
# the packages declare what the optional layers need: qkv-io requires nlohmann_json, and
# qkv-runtime carries the -march of this build's simd_arch (none: QKV_RUNTIME_PORTABLE instead)
PKG_CONFIG_PATH=$pcdir pkg-config --print-requires qkv-io | grep -q '^nlohmann_json' ||
  fail "qkv-io.pc does not require nlohmann_json"
simd_arch=$(meson introspect --buildoptions "$build" | python3 -c '
import json, sys; print({x["name"]: x["value"] for x in json.load(sys.stdin)}["simd_arch"])')
runtime_cflags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags qkv-runtime)
case $simd_arch:$runtime_cflags in
  none:*-DQKV_RUNTIME_PORTABLE*) ;;
  none:*) fail "qkv-runtime.pc: simd_arch=none but its cflags '$runtime_cflags' lack -DQKV_RUNTIME_PORTABLE" ;;
  *:*"-march=$simd_arch"*) ;;
  *) fail "qkv-runtime.pc: cflags '$runtime_cflags' lack -march=$simd_arch" ;;
esac
done_step "staged install in $stage$prefix ($(cd "$inc" && find qkv -name '*.hpp' | wc -l) headers, bin/qkv $version, qkv.pc, qkv-runtime.pc ($runtime_cflags), qkv-io.pc, CMake package)"

# --- 2. meson + pkg-config -------------------------------------------------------------------
copy_out pkgconfig
echo "pkg-config --cflags qkv: $(PKG_CONFIG_PATH=$pcdir pkg-config --cflags qkv)" >>"$log"
run env PKG_CONFIG_PATH="$pcdir" CXX="$cxx" meson setup "$work/pkgconfig/build" "$work/pkgconfig/src" ||
  fail "pkgconfig consumer: meson setup"
run meson compile -C "$work/pkgconfig/build" || fail "pkgconfig consumer: build"
# the staged <libdir> is not on the loader's path: LD_LIBRARY_PATH, as for any non-system prefix
run env LD_LIBRARY_PATH="$libs" meson test -C "$work/pkgconfig/build" --print-errorlogs || fail "pkgconfig consumer: run"
grep -q "run time == compile time" "$work/pkgconfig/build/meson-logs/testlog.txt" ||
  fail "pkgconfig consumer: the program did not report its result"
grep -q "io/ and exact/ work" "$work/pkgconfig/build/meson-logs/testlog.txt" ||
  fail "pkgconfig consumer: extras did not report its result"
# with libqkv_kernels the float kernels are chosen at run time: avx2 or avx512, not header-only
expect_kernels() {  # expect_kernels WHO LOGFILE
  local want="kernels header-only"
  [ "$kernels" = true ] && want="kernels avx"
  grep -q "$want" "$2" || fail "$1: extras did not run '$want...' ($(grep -o 'kernels [a-z0-9-]*' "$2" | head -1))"
}
expect_kernels "pkgconfig consumer" "$work/pkgconfig/build/meson-logs/testlog.txt"
done_step "meson, dependency('qkv'), ('qkv-runtime'), ('qkv-io') from the staged .pc files ($(grep -o 'kernels [a-z0-9-]*' "$work/pkgconfig/build/meson-logs/testlog.txt" | head -1))"

# --- 3. meson subproject ---------------------------------------------------------------------
copy_out subproject
mkdir -p "$work/subproject/src/subprojects"
ln -s "$source_root" "$work/subproject/src/subprojects/qkv"
# no PKG_CONFIG_PATH into the stage: the dependency must come from the subproject
run env -u PKG_CONFIG_PATH CXX="$cxx" meson setup "$work/subproject/build" "$work/subproject/src" ||
  fail "subproject consumer: meson setup"
run meson compile -C "$work/subproject/build" || fail "subproject consumer: build"
run meson test -C "$work/subproject/build" --print-errorlogs || fail "subproject consumer: run"
# qkv as a subproject: no targets of its own (no tool, examples or tests), nothing installed
targets=$(meson introspect --targets "$work/subproject/build" | python3 -c '
import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
[ "$targets" = "consumer extras" ] || fail "subproject consumer: targets are '$targets', expected only 'consumer extras'"
# a subproject builds no library: its runtime/ is header-only
grep -q "kernels header-only" "$work/subproject/build/meson-logs/testlog.txt" ||
  fail "subproject consumer: extras did not run header-only"
run meson install -C "$work/subproject/build" --no-rebuild --destdir "$work/subproject/stage" ||
  fail "subproject consumer: meson install"
installed=$(cd "$work/subproject/stage" && find . -type f | sed 's|.*/||' | sort | tr '\n' ' ')
[ "$installed" = "consumer " ] || fail "subproject consumer: installed '$installed', expected only 'consumer'"
done_step "meson, qkv as a subproject (built and installed nothing of its own)"

# --- 4. CMake find_package -------------------------------------------------------------------
copy_out cmake
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
run cmake "${generator[@]}" -S "$work/cmake/src" -B "$work/cmake/build" -DCMAKE_PREFIX_PATH="$root" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo || fail "cmake consumer: configure"
grep -q "qkv_DIR:PATH=$cmakedir" "$work/cmake/build/CMakeCache.txt" ||
  fail "cmake consumer: find_package(qkv) did not find the staged package in $cmakedir"
run cmake --build "$work/cmake/build" || fail "cmake consumer: build"
(cd "$work/cmake/build" && run ctest --output-on-failure -V) || fail "cmake consumer: run"
grep -q "run time == compile time" "$log" || fail "cmake consumer: the program did not report its result"
grep -q "io/ and exact/ work" "$log" || fail "cmake consumer: extras did not report its result"
expect_kernels "cmake consumer" "$log"
# the version file: 0.x accepts the same minor version only (0.1 -> 0.1.z), never 0.2 or 1.0
mkdir -p "$work/cmake/probe"
cat >"$work/cmake/probe/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(qkv_version_probe NONE)
foreach(wanted 0.2 1.0)
  find_package(qkv ${wanted} QUIET)
  if(qkv_FOUND)
    message(FATAL_ERROR "find_package(qkv ${wanted}) accepted qkv ${qkv_VERSION}")
  endif()
endforeach()
find_package(qkv 0.1 QUIET)
if(NOT qkv_FOUND)
  message(FATAL_ERROR "find_package(qkv 0.1) refused qkv ${qkv_VERSION}")
endif()
EOF
run cmake -S "$work/cmake/probe" -B "$work/cmake/probe/build" -DCMAKE_PREFIX_PATH="$root" ||
  fail "cmake consumer: qkvConfigVersion.cmake accepted a wrong version or refused its own"
# a required component whose library is missing, and an unknown component: find_package fails
# and its message says what is missing
mkdir -p "$work/cmake/missing"
cat >"$work/cmake/missing/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(qkv_missing_probe CXX)
find_package(qkv 0.1 REQUIRED COMPONENTS ${WANT})
EOF
expect_refusal() {  # expect_refusal WHAT TEXT CMAKE_ARGS...
  local what=$1 text=$2
  shift 2
  rm -rf "$work/cmake/missing/build"
  if cmake -S "$work/cmake/missing" -B "$work/cmake/missing/build" -DCMAKE_PREFIX_PATH="$root" \
       -DCMAKE_CXX_COMPILER="$cxx" "$@" >"$work/cmake/missing.log" 2>&1; then
    cat "$work/cmake/missing.log" >>"$log"
    fail "cmake consumer: find_package(qkv) accepted $what"
  fi
  grep -q "$text" "$work/cmake/missing.log" || {
    cat "$work/cmake/missing.log" >>"$log"
    fail "cmake consumer: find_package(qkv) refused $what without saying '$text'"
  }
}
expect_refusal "COMPONENTS io without nlohmann_json" "qkv::io (include/qkv/io/) needs nlohmann_json" \
  -DWANT=io -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=TRUE
expect_refusal "COMPONENTS exact without Boost" "qkv::exact (include/qkv/exact/, reference/) needs Boost" \
  -DWANT=exact -DCMAKE_DISABLE_FIND_PACKAGE_Boost=TRUE
expect_refusal "an unknown component" "qkv has no component 'nonsense'" -DWANT=nonsense
done_step "CMake, find_package(qkv COMPONENTS runtime io exact) from the staged package; missing ones named"

# --- 5. the light install ---------------------------------------------------------------------
# -Dtests=false -Dexamples=false: the tool and nothing else (its `qkv explain` stubs say the
# examples were not built) and its pages' WebAssembly module (wasm/: qkv_wasm.wasm embedded as
# page_wasm.hpp, or a header saying why not); configured only, as building the tool is what the
# build above did
light=$work/light
run env CXX="$cxx" meson setup "$light" "$source_root" -Dtests=false -Dexamples=false || fail "light install: meson setup"
light_targets=$(meson introspect --targets "$light" | python3 -c '
import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
for t in $light_targets; do
  case $t in qkv | qkv_commands | example_not_built_* | examples_list.hpp | qkv_single_header | qkv_wasm.wasm | page_wasm.hpp | qkv_attend.wasm | page_attend_wasm.hpp | qkv_wide.wasm | page_wide_wasm.hpp | qkv_truth.wasm | page_truth_wasm.hpp | qkv_kernels | qkv_kernels_avx512) ;; *) fail "light install: builds '$t' (targets: $light_targets)" ;; esac
done
for f in $(meson introspect --targets "$light" | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    for s in t["target_sources"]:
        for f in s.get("sources", []): print(f)'); do
  case $f in */examples/*.cpp) fail "light install: compiles the example $f" ;; esac
done
# -Dtool=false as well: nothing to build at all; the install is the headers and the packages
light_root=$work/light-stage
run env CXX="$cxx" meson setup "$light-headers" "$source_root" -Dtests=false -Dexamples=false -Dtool=false -Dkernels=false ||
  fail "light install: meson setup -Dtool=false"
headers_targets=$(meson introspect --targets "$light-headers" | python3 -c '
import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
# (where libqkv_kernels is built, -Dtool=false builds and installs it too: two targets more; step 1
# checked its install, so -Dkernels=false here keeps this step free of 40 s of compiling)
[ "$headers_targets" = "qkv_single_header" ] ||
  fail "light install: -Dtool=false has targets '$headers_targets', expected only qkv_single_header"

run meson install -C "$light-headers" --destdir "$light_root" || fail "light install: meson install -Dtool=false"
for f in qkv.pc qkv-runtime.pc qkv-io.pc qkvConfig.cmake; do
  [ -n "$(find "$light_root" -name "$f")" ] || fail "light install: $f is not installed"
done
[ -n "$(find "$light_root" -path '*include/qkv/qkv.hpp')" ] || fail "light install: the headers are not installed"
[ -z "$(find "$light_root" -path '*/bin/qkv')" ] || fail "light install: -Dtool=false installed bin/qkv"
done_step "light install: -Dtests=false -Dexamples=false builds $(echo "$light_targets" | wc -w) targets (qkv, its explain stubs, its pages' modules, the single header); -Dtool=false -Dkernels=false the single header alone"

echo "consumers: all passed"
