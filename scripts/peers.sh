#!/usr/bin/env bash
# peers.sh: the peer comparison of docs/performance.md ("Method"), run from this repository:
# bench/peers/run.sh (the harness: W1-W5 and W4c/W5c, the causal W4 and W5, 1 and 2 threads,
# interleaved repetitions, float64 checks) with qkv as bench/peers/qkv_peer.cpp (the public API
# only) beside Eigen, OpenBLAS, PyTorch 1.13 and ONNX Runtime 1.30 (onnxruntime-node).
#   ./scripts/peers.sh                            everything; qkv built with -march=native
#   QKV_SIMD_ARCH=x86-64-v3 ./scripts/peers.sh    qkv built for AVX2 + FMA, the package default
#   BENCH_WORKLOADS=W4,W4c BENCH_THREADS=1 BENCH_REPS=5 ./scripts/peers.sh   a subset (every
#                                                 knob of bench/peers/run.sh passes through)
# Prerequisites (Debian, once): g++ libeigen3-dev libopenblas-dev python3-torch python3-onnx nodejs npm.
# onnxruntime-node (1.30.0, its CPU library inside the npm package) is installed with npm into
# bench/peers/.ort on the first run (QKV_PEERS_NO_INSTALL=1: never; ONNX Runtime is then
# skipped when it is missing). Run it on an otherwise idle machine (`uptime`): the report's
# "Other load" column marks busy rows. Output, in build-peers-<arch>/: peers.md (the report),
# logs/, load.txt (the load average before and after). No test needs node or the harness.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
arch=${QKV_SIMD_ARCH:-native}
peers=${QKV_PEERS_DIR:-$root/bench/peers}
out=$root/build-peers-$arch
mkdir -p "$out"

if command -v node >/dev/null; then
  if [ ! -d "$peers/.ort/node_modules/onnxruntime-node" ] && [ "${QKV_PEERS_NO_INSTALL:-0}" != 1 ]; then
    command -v npm >/dev/null || { echo "peers.sh: npm not found: install it (apt-get install npm) or set BENCH_ORT=0" >&2; exit 1; }
    echo "peers.sh: installing onnxruntime-node 1.30.0 into $peers/.ort (npm)"
    mkdir -p "$peers/.ort"
    # a package.json of our own: `npm init -y` takes the folder's name, and ".ort" is no valid name
    (cd "$peers/.ort" && { [ -f package.json ] || echo '{"name": "qkv-peers-ort", "private": true}' >package.json; } \
       && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30.0)
  fi
else
  echo "peers.sh: node not found: ONNX Runtime skipped (apt-get install nodejs npm)" >&2
  export BENCH_ORT=0
fi

echo "peers.sh: qkv $(git rev-parse --short HEAD 2>/dev/null || echo '?') with -march=$arch, load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"
(cd "$peers" && EXTRA_IMPL_SOURCES="$root/bench/peers/qkv_peer.cpp" \
   EXTRA_IMPL_CXXFLAGS="-I$root/include -ffp-contract=off -march=$arch" \
   BUILD_DIR="$out/build" LOG_DIR="$out/logs" BENCH_OUT="$out/peers.md" \
   ./run.sh) 2>&1 | tee "$out/run.log"
echo "peers.sh: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
echo "peers.sh: the report: $out/peers.md; every validated row must say ok:"
grep -h '^RESULT' "$out"/logs/*.log | awk -F'\t' '$14 !~ /^(ok|n\/a)/' || true
