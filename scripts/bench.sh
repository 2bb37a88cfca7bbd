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
#   QKV_PEERS=1 ./scripts/bench.sh           then also the peer harness, bench/peers/ (ONNX Runtime,
#                                            Eigen, OpenBLAS, PyTorch; scripts/peers.sh, which
#                                            installs onnxruntime-node with npm on its first run)
#   QKV_PEERS=1 QKV_PEERS_ONLY=1 ./scripts/bench.sh   the peer harness alone (= scripts/peers.sh)
# Results: the console table, and bench-results.json (Google Benchmark's JSON) and bench-load.txt
# (the load average before and after the run) in the build folder; the peers' report in
# build-peers-<arch>/peers.md, their logs in build-peers-<arch>/logs/. No test needs node or the harness.
# docs/performance.md explains the workloads, the machine and how to read the numbers;
# scripts/bench_table.py turns bench-results.json into its tables.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${QKV_SIMD_ARCH:-native}
dir=build-bench
[ "$arch" = native ] || dir=build-bench-$arch

# the peer harness: scripts/peers.sh (bench/peers/, or the folder QKV_PEERS names when it is
# not 1), for this build's simd_arch
run_peers() {
  local peers=$1
  [ "$peers" = 1 ] && peers=$PWD/bench/peers
  QKV_PEERS_DIR=$peers QKV_SIMD_ARCH=$arch ./scripts/peers.sh
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
