#!/usr/bin/env bash
# run.sh -- build and run the CPU attention benchmark: physical limits
# (peak.cpp), the C++ peers (Eigen, OpenBLAS), the PyTorch peers, any plugged-in
# implementation, a few diagnostics; print one Markdown table and write
# baseline.md.  See README.md.
#
# Environment knobs (all optional):
#   BENCH_REPS=7            repetitions per measurement (>= 5)
#   BENCH_WORKLOADS=W1,..   subset of W1..W5, W4c, W5c (W4 and W5 causal)
#   BENCH_THREADS=1,2       thread counts
#   BENCH_TORCH=1           0: skip the PyTorch peers
#   BENCH_DIAG=1            0: skip the diagnostics (OPENBLAS_CORETYPE, OMP_WAIT_POLICY)
#   BENCH_QUIET_BUDGET=20   max seconds each runner may wait for other processes to go quiet
#   BENCH_OUT=.../baseline.md   where to write the report ("" = don't)
#   BUILD_DIR=/tmp/bench/build  LOG_DIR=/tmp/bench/logs
#   CXX=g++  EXTRA_CXXFLAGS=  EXTRA_LDFLAGS=  EXTRA_IMPL_SOURCES="a.cpp b.cpp"
#   EXTRA_IMPL_CXXFLAGS=    flags for the EXTRA_IMPL_SOURCES only (EXTRA_CXXFLAGS go to every object)
#   BENCH_EXTRA_CMDS=$'cmd1\ncmd2'   extra command implementations (see README)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CALLER_PWD="$PWD"
BUILD="${BUILD_DIR:-/tmp/bench/build}"
LOGS="${LOG_DIR:-/tmp/bench/logs}"
REPS="${BENCH_REPS:-7}"
WORKLOADS="${BENCH_WORKLOADS:-W1,W2,W3,W4,W5,W4c,W5c}"
THREADS="${BENCH_THREADS:-1,2}"
QUIET="${BENCH_QUIET_BUDGET:-20}"
OUT_MD="${BENCH_OUT-$HERE/baseline.md}"
PY="/usr/bin/python3 -B"       # the Debian python that has torch 1.13 (-B: no __pycache__ here)
CXX="${CXX:-g++}"
CXXFLAGS="-O3 -march=native -std=c++20"
EIGEN_INC="${EIGEN_INC:-/usr/include/eigen3}"

mkdir -p "$BUILD" "$LOGS"
rm -f "$LOGS"/*.log
cd "$HERE"
T_START=$(date +%s)

# ------------------------------------------------------------------ build
echo "== build ($CXX $CXXFLAGS) -> $BUILD" >&2
pids=()
build() {  # build OUT CMD...
    local out="$1"; shift
    ( "$@" 2> "$BUILD/$(basename "$out").err" || { cat "$BUILD/$(basename "$out").err" >&2; exit 1; } ) &
    pids+=($!)
}
build libmemtrack.so gcc -O2 -fPIC -shared memtrack.c -o "$BUILD/libmemtrack.so"
build libbenchprobe.so $CXX $CXXFLAGS -fPIC -shared -pthread probe.cpp -o "$BUILD/libbenchprobe.so"
build peak $CXX $CXXFLAGS -pthread peak.cpp -o "$BUILD/peak"
objs=()
extra_srcs=()
for src in ${EXTRA_IMPL_SOURCES:-}; do  # relative paths: to the caller's directory, else to bench/
    case "$src" in /*) ;; *) [ -f "$CALLER_PWD/$src" ] && src="$CALLER_PWD/$src" ;; esac
    extra_srcs+=("$src")
done
for src in harness.cpp impls/*.cpp "${extra_srcs[@]}"; do
    obj="$BUILD/obj_$(echo "$src" | tr '/.' '__').o"
    objs+=("$obj")
    case " ${extra_srcs[*]} " in *" $src "*) impl_flags="${EXTRA_IMPL_CXXFLAGS:-}" ;; *) impl_flags= ;; esac
    # shellcheck disable=SC2086
    build "$obj" $CXX $CXXFLAGS -fopenmp -I"$HERE" -I"$EIGEN_INC" ${EXTRA_CXXFLAGS:-} $impl_flags -c "$src" -o "$obj"
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
[ "$fail" = 0 ] || { echo "build failed" >&2; exit 1; }
# shellcheck disable=SC2086
$CXX -fopenmp "${objs[@]}" -o "$BUILD/attn_bench" -L"$BUILD" -lmemtrack -lbenchprobe -lopenblas \
    -Wl,-rpath,"$BUILD" ${EXTRA_LDFLAGS:-}
echo "== build done in $(( $(date +%s) - T_START )) s" >&2

export BENCH_PROBE_LIB="$BUILD/libbenchprobe.so" BENCH_MEMTRACK_LIB="$BUILD/libmemtrack.so"
export BENCH_REPS="$REPS" BENCH_WORKLOADS="$WORKLOADS" BENCH_THREADS="$THREADS" BENCH_QUIET_BUDGET="$QUIET"

# ------------------------------------------------------------------ meta
{
    printf 'META\tdate\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
    printf 'META\tmachine\t%s (family %s, model %s, stepping %s); %s CPUs; %s\n' \
        "$(lscpu | sed -n 's/^Model name: *//p')" "$(lscpu | sed -n 's/^CPU family: *//p')" \
        "$(lscpu | sed -n 's/^Model: *//p')" "$(lscpu | sed -n 's/^Stepping: *//p')" "$(nproc)" \
        "$(lscpu | sed -n 's/^Hypervisor vendor: *//p' | sed 's/^./VM (&/;s/$/)/')"
    printf 'META\tcaches\t%s\n' "$(lscpu | grep -E '^L[123]' | sed 's/  */ /g' | paste -sd ';' -)"
    printf 'META\tflags\t%s\n' "$(lscpu | sed -n 's/^Flags: *//p')"
    printf 'META\tmemory\t%s\n' "$(free -g | awk '/^Mem:/{print $2 " GiB"}')"
    printf 'META\tos\t%s, kernel %s\n' "$(. /etc/os-release; echo "$PRETTY_NAME")" "$(uname -r)"
    printf 'META\tcompiler\t%s, flags %s (-fopenmp for the harness)\n' "$($CXX --version | head -1)" "$CXXFLAGS"
    printf 'META\tlibraries\tEigen %s; OpenBLAS %s (pthreads); torch %s (python3-torch %s), numpy %s\n' \
        "$(dpkg-query -W -f='${Version}' libeigen3-dev 2>/dev/null)" \
        "$(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null)" \
        "$($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo n/a)" \
        "$(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null)" \
        "$($PY -c 'import numpy; print(numpy.__version__)' 2>/dev/null || echo n/a)"
    if [ -n "${EXTRA_IMPL_SOURCES:-}" ]; then
        printf 'META\textra implementations\t%s (EXTRA_CXXFLAGS=%s; EXTRA_IMPL_CXXFLAGS=%s)\n' \
            "${EXTRA_IMPL_SOURCES}" "${EXTRA_CXXFLAGS:-}" "${EXTRA_IMPL_CXXFLAGS:-}"
    fi
    printf 'META\tprotocol\treps=%s per measurement, interleaved across implementations, quiet gate budget %ss per runner\n' \
        "$REPS" "$QUIET"
    printf 'META\tload before run\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg) (1/5/15-min load average)"
} > "$LOGS/meta.log"

# ------------------------------------------------------------------ physical limits
stage() { echo "== [$(( $(date +%s) - T_START )) s] $*" >&2; }
stage "peak"
"$BUILD/peak" --reps "$REPS" --quiet-budget-s "$QUIET" | tee "$LOGS/peak.log" | grep -v '^PEAK' >&2

# ------------------------------------------------------------------ C++ peers (+ plugged-in C++ impls)
stage "C++ implementations: $("$BUILD/attn_bench" --list | grep -v '^W[0-9]' | cut -f1 | paste -sd ' ' -)" >&2
"$BUILD/attn_bench" --workloads "$WORKLOADS" --threads "$THREADS" --reps "$REPS" --quiet-budget-s "$QUIET" \
    | tee "$LOGS/cpp.log" | cut -f1-6,14 >&2

# ------------------------------------------------------------------ PyTorch peers
if [ "${BENCH_TORCH:-1}" = 1 ]; then
    stage "torch"
    LD_PRELOAD="$BUILD/libmemtrack.so" $PY bench_torch.py --workloads "$WORKLOADS" --threads "$THREADS" \
        --reps "$REPS" --quiet-budget-s "$QUIET" | tee "$LOGS/torch.log" | cut -f1-6,14 >&2
fi

# ------------------------------------------------------------------ command-style implementations
n=0
{
    [ -f "$HERE/extra_commands.txt" ] && grep -v '^[[:space:]]*\(#\|$\)' "$HERE/extra_commands.txt"
    [ -n "${BENCH_EXTRA_CMDS:-}" ] && printf '%s\n' "$BENCH_EXTRA_CMDS"
    true
} | while IFS= read -r cmd; do
    n=$((n + 1))
    stage "extra command: $cmd"
    bash -c "$cmd" < /dev/null | tee "$LOGS/extra_$n.log" | grep '^RESULT' | cut -f1-6,14 >&2 || true
done

# ------------------------------------------------------------------ diagnostics
if [ "${BENCH_DIAG:-1}" = 1 ]; then
    stage "diagnostics"
    median_of() {  # RESULT lines on stdin -> "x.xx ms (y GFLOP/s)"
        awk -F'\t' '/^RESULT/{printf "%.2f ms (%.1f GFLOP/s), cores used %.2f, other load %.2f", $6*1e3, $8/$6*1e-9, $10, $13; f=1}
                    END{if(!f) printf "no result"}'
    }
    {
        $PY - <<'EOF'
import ctypes
ob = ctypes.CDLL("libopenblas.so.0")
ob.openblas_get_corename.restype = ctypes.c_char_p
ob.openblas_get_config.restype = ctypes.c_char_p
print("DIAG\tOpenBLAS kernel (auto-detected)\tOPENBLAS_CORETYPE unset\t%s; %s; default threads %d"
      % (ob.openblas_get_corename().decode(), ob.openblas_get_config().decode(), ob.openblas_get_num_threads()))
EOF
        if [ "${BENCH_TORCH:-1}" = 1 ]; then
            $PY - <<'EOF'
import ctypes
g = ctypes.CDLL("libgomp.so.1")
before = g.omp_get_max_threads()
import torch
print("DIAG\ttorch default intra-op threads\tOMP_NUM_THREADS unset\t"
      f"torch.get_num_threads() = {torch.get_num_threads()} (omp_get_max_threads: {before} before import torch, "
      f"{g.omp_get_max_threads()} after); interop {torch.get_num_interop_threads()}; "
      f"BLAS = OpenBLAS via libblas.so.3, its pool is not resized by torch.set_num_threads")
EOF
        fi
        for ct in "" Haswell Sandybridge Prescott SkylakeX; do
            set +e
            res=$(OPENBLAS_CORETYPE="$ct" "$BUILD/attn_bench" --workloads W4 --impls openblas-gemm-only --threads 1 \
                  --reps 5 --quiet-budget-s 2 2>/dev/null)
            rc=$?
            set -e
            if [ $rc -ne 0 ]; then r="process died, exit code $rc$([ $rc = 132 ] && echo ' (SIGILL: kernel uses AVX-512, CPU has none)')"
            else r=$(printf '%s\n' "$res" | median_of); fi
            printf 'DIAG\tW4 openblas-gemm-only, 1 thread\tOPENBLAS_CORETYPE=%s\t%s\n' "${ct:-(unset: Zen)}" "$r"
        done
        r=$(OMP_WAIT_POLICY=PASSIVE "$BUILD/attn_bench" --workloads W3 --impls openblas-omp-softmax,openblas \
            --threads 2 --reps 5 --quiet-budget-s 3 2>/dev/null | grep -P '\topenblas-omp-softmax\t' | median_of)
        printf 'DIAG\tW3 openblas-omp-softmax, 2 threads\tOMP_WAIT_POLICY=PASSIVE\t%s (compare the default in the table)\n' "$r"
        if [ "${BENCH_TORCH:-1}" = 1 ]; then
            r=$(OMP_WAIT_POLICY=PASSIVE $PY bench_torch.py --workloads W3 --threads 2 --impls torch-naive \
                --reps 5 --quiet-budget-s 3 2>/dev/null | median_of)
            printf 'DIAG\tW3 torch-naive, 2 threads\tOMP_WAIT_POLICY=PASSIVE\t%s (compare the default in the table)\n' "$r"
            # glibc gives >= 32 MiB blocks back to the kernel (munmap / heap trim) on free, so torch's fresh
            # n^2 temporaries page-fault on every call; keep the heap instead (buffers < 32 MiB only: W4, not W5)
            tun=glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432
            r=$(GLIBC_TUNABLES=$tun $PY bench_torch.py --workloads W4 --threads 1 --impls torch-naive \
                --reps 5 --quiet-budget-s 3 2>/dev/null | median_of)
            printf 'DIAG\tW4 torch-naive, 1 thread\tGLIBC_TUNABLES=%s\t%s (compare the default in the table)\n' "$tun" "$r"
        fi
    } | tee "$LOGS/diag.log" | cut -f2- >&2
fi

# ------------------------------------------------------------------ physical limits, second pass
stage "peak (second pass)"
"$BUILD/peak" --reps 5 --quiet-budget-s 10 | tee "$LOGS/peak_end.log" | grep '^fma' >&2

printf 'META\truntime\t%s s for run.sh (build included); load average after: %s\n' \
    "$(( $(date +%s) - T_START ))" "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOGS/meta.log"

# ------------------------------------------------------------------ report
echo >&2
if [ -n "$OUT_MD" ]; then
    $PY report.py --out "$OUT_MD" --notes "$HERE/notes.md" "$LOGS"/*.log
    echo >&2
    echo "(written to $OUT_MD; raw logs in $LOGS)" >&2
else
    $PY report.py "$LOGS"/*.log
fi
