#!/usr/bin/env bash
# bench.sh: build the Google Benchmark suite (bench/) in release mode with g++ and run it:
# every workload and implementation interleaved at random, repeated, medians reported.
#   ./scripts/bench.sh                      all benchmarks, 7 repetitions
#   ./scripts/bench.sh 'W4|W5'              only those matching a regex
#   QKV_BENCH_REPS=15 ./scripts/bench.sh    more repetitions
#   QKV_SIMD_ARCH=x86-64-v3 ./scripts/bench.sh  the runtime path built for AVX2 + FMA (the
#                                            project's default simd_arch), in build-bench-x86-64-v3
# By default the runtime path is built for this CPU (simd_arch=native, in build-bench): OpenBLAS,
# the peer, picks its kernels for the CPU it runs on (AVX-512 where there is one), so this is the
# like-for-like comparison. docs/performance.md reports both builds.
#   QKV_PEERS=/path/to/peers ./scripts/bench.sh   then also the peer harness (ONNX Runtime, Eigen,
#                                            OpenBLAS, PyTorch; docs/performance.md, "ONNX Runtime"),
#                                            when node and its onnxruntime-node package are there
#   QKV_PEERS=... QKV_PEERS_ONLY=1 ./scripts/bench.sh   the peer harness alone
# Results: the console table, and bench-results.json (Google Benchmark's JSON) and bench-load.txt
# (the load average before and after the run) in the build folder; the peers' report in
# <build folder>/peers.md, their logs in <build folder>/peers/. No test needs node or the harness.
# docs/performance.md explains the workloads, the machine and how to read the numbers;
# scripts/bench_table.py turns bench-results.json into its tables.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${QKV_SIMD_ARCH:-native}
dir=build-bench
[ "$arch" = native ] || dir=build-bench-$arch

# the peer harness (a folder outside this repository: run.sh, bench_ort.js, impls_qkv/), run on
# qkv's own copy of its qkv implementation (bench/peers/qkv_peer.cpp, today's API). Skipped with
# a message when node or onnxruntime-node is missing.
run_peers() {
  local peers=$1 root=$PWD
  if [ ! -f "$peers/run.sh" ] || [ ! -f "$peers/bench_ort.js" ]; then
    echo "bench.sh: QKV_PEERS=$peers holds no run.sh and bench_ort.js: peers skipped" >&2
    return 0
  fi
  command -v node >/dev/null \
    || { echo "bench.sh: node not found: peers skipped (the harness needs node and onnxruntime-node)" >&2; return 0; }
  (cd "$peers" && node -e "try { require('onnxruntime-node') } catch (e) {
      require(require('path').resolve(process.env.ORT_NODE_DIR || '.ort', 'node_modules', 'onnxruntime-node')) }" \
      >/dev/null 2>&1) \
    || { echo "bench.sh: onnxruntime-node not found beside $peers (.ort/node_modules or \$ORT_NODE_DIR): peers skipped" >&2; return 0; }
  mkdir -p "$dir/peers"
  echo "bench.sh: peer harness $peers, qkv at $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$dir/peers-load.txt"
  (cd "$peers" && EXTRA_IMPL_SOURCES="$root/bench/peers/qkv_peer.cpp" \
     EXTRA_IMPL_CXXFLAGS="-I$root/include -ffp-contract=off" \
     BUILD_DIR="$root/$dir/peers/build" LOG_DIR="$root/$dir/peers/logs" BENCH_OUT="$root/$dir/peers.md" \
     ./run.sh) 2>&1 | tee "$dir/peers/run.log"
  echo "bench.sh: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$dir/peers-load.txt"
  echo "bench.sh: the peers' report: $dir/peers.md"
}
if [ -n "${QKV_PEERS:-}" ] && [ "${QKV_PEERS_ONLY:-0}" = 1 ]; then
  mkdir -p "$dir"
  run_peers "$QKV_PEERS"
  exit 0
fi

./scripts/setup.sh

if [ ! -f "$dir/build.ninja" ]; then
  CXX=${CXX:-g++} meson setup "$dir" -Dbench=true -Dtests=false -Dbuildtype=release -Dsimd_arch="$arch" >"$dir.setup.log" 2>&1 \
    || { cat "$dir.setup.log"; exit 1; }
  rm -f "$dir.setup.log"
else
  meson configure "$dir" -Dsimd_arch="$arch"  # a folder made by an older bench.sh may have another
fi
meson compile -C "$dir" -j 2 bench/qkv_bench

# Two thread pools that spin after their work fight over two cores (docs/performance.md):
# OpenMP (Eigen) waits passively, and OpenBLAS's idle threads give up the core almost at once.
# qkv's own pool spins for at most 200 µs after a job, then sleeps (runtime/thread_pool.hpp).
export OMP_WAIT_POLICY=PASSIVE
export OPENBLAS_THREAD_TIMEOUT=4

filter=${1:-.}
echo "bench.sh: simd_arch=$arch, load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$dir/bench-load.txt"
"$dir/bench/qkv_bench" \
  --benchmark_filter="$filter" \
  --benchmark_repetitions="${QKV_BENCH_REPS:-7}" \
  --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true \
  --benchmark_min_time="${QKV_BENCH_MIN_TIME:-0.2}" \
  --benchmark_out="$dir/bench-results.json" --benchmark_out_format=json
echo "bench.sh: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$dir/bench-load.txt"
echo "bench.sh: medians above; all repetitions in $dir/bench-results.json; tables: scripts/bench_table.py $dir/bench-results.json"
[ -z "${QKV_PEERS:-}" ] || run_peers "$QKV_PEERS"
