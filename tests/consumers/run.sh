#!/usr/bin/env bash
# run.sh: use qkv the three ways a project would, against a staged install of a qkv build.
#
#   tests/consumers/run.sh BUILD_DIR [CXX]
#
# BUILD_DIR is a configured and built qkv build folder (meson test passes its own). This
#   1. stages it: meson install --no-rebuild --destdir BUILD_DIR/consumers/stage, and checks
#      that every header of include/qkv, bin/qkv, qkv.pc and the CMake package are there;
#   2. builds and runs tests/consumers/pkgconfig  (dependency('qkv') through qkv.pc, found with
#      PKG_CONFIG_PATH in the staging tree: the .pc is relocatable, prefix=${pcfiledir}/../..);
#   3. builds and runs tests/consumers/subproject (subprojects/qkv a symlink to this source
#      tree, made here), and checks that qkv built and installed nothing of its own;
#   4. builds and runs tests/consumers/cmake      (find_package(qkv) with CMAKE_PREFIX_PATH in the
#      staging tree).
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
read -r prefix includedir bindir datadir < <(meson introspect --buildoptions "$build" | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"], o["includedir"], o["bindir"], o["datadir"])')
root=$stage$prefix
abs() { case $1 in /*) echo "$stage$1" ;; *) echo "$root/$1" ;; esac; }
inc=$(abs "$includedir")
for h in $(cd "$source_root/include" && find qkv -name '*.hpp' | sort); do
  [ -f "$inc/$h" ] || fail "header $h is not installed (expected $inc/$h)"
done
pcdir=$(abs "$datadir")/pkgconfig
cmakedir=$(abs "$datadir")/cmake/qkv
for f in "$pcdir/qkv.pc" "$cmakedir/qkvConfig.cmake" "$cmakedir/qkvConfigVersion.cmake"; do
  [ -f "$f" ] || fail "$f is not installed"
done
version=$(meson introspect --projectinfo "$build" | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
tool_version=$("$(abs "$bindir")/qkv" --version 2>>"$log") || fail "the installed bin/qkv --version"
case $tool_version in *"$version"*) ;; *) fail "bin/qkv --version printed '$tool_version', not $version" ;; esac
done_step "staged install in $stage$prefix ($(cd "$inc" && find qkv -name '*.hpp' | wc -l) headers, bin/qkv $version, qkv.pc, CMake package)"

# --- 2. meson + pkg-config -------------------------------------------------------------------
copy_out pkgconfig
echo "pkg-config --cflags qkv: $(PKG_CONFIG_PATH=$pcdir pkg-config --cflags qkv)" >>"$log"
run env PKG_CONFIG_PATH="$pcdir" CXX="$cxx" meson setup "$work/pkgconfig/build" "$work/pkgconfig/src" ||
  fail "pkgconfig consumer: meson setup"
run meson compile -C "$work/pkgconfig/build" || fail "pkgconfig consumer: build"
run meson test -C "$work/pkgconfig/build" --print-errorlogs || fail "pkgconfig consumer: run"
grep -q "run time == compile time" "$work/pkgconfig/build/meson-logs/testlog.txt" ||
  fail "pkgconfig consumer: the program did not report its result"
done_step "meson, dependency('qkv') from the staged qkv.pc"

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
[ "$targets" = "consumer" ] || fail "subproject consumer: targets are '$targets', expected only 'consumer'"
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
done_step "CMake, find_package(qkv) and qkv::qkv from the staged package"

echo "consumers: all three passed"
