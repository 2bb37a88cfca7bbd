#!/usr/bin/env bash
# setup.sh: install what qkv needs from Debian's packages; does nothing when all is there.
#
# needed:   g++ (12), clang-16 (clang++-16 on libstdc++), meson, ninja, cmake (meson finds
#           doctest through its CMake config), doctest, Boost (Multiprecision), nlohmann-json,
#           Google Benchmark; for the benchmark's peers: Eigen and OpenBLAS; for clang's
#           -fsanitize=address,undefined its runtime libclang-rt-16-dev (only a Recommends of
#           clang-16, which --no-install-recommends skips). g++'s comes with it (libasan8, libubsan1).
#           For the learner's pages' browser test (tests/browser/): chromium, chromium-driver and
#           python3-selenium. clang-format-16 checks the code's format (tests/support/check_format.py).
#           For the pages' WebAssembly module (wasm/, docs/pages.md "Editing a page"): wasi-libc,
#           libc++-16-dev-wasm32, libc++abi-16-dev-wasm32, libclang-rt-16-dev-wasm32 and lld-16
#           (clang++-16 --target=wasm32-wasi); without them the pages are not editable and say why.
set -euo pipefail

packages=(g++ clang-16 libclang-rt-16-dev meson ninja-build cmake pkg-config doctest-dev libboost-dev
          nlohmann-json3-dev libbenchmark-dev libeigen3-dev libopenblas-dev
          chromium chromium-driver python3-selenium clang-format-16
          wasi-libc libc++-16-dev-wasm32 libc++abi-16-dev-wasm32 libclang-rt-16-dev-wasm32 lld-16)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
  else
    echo "setup: run as root (or install them yourself): apt-get install ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: installed ${missing[*]}"
