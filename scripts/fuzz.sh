#!/usr/bin/env bash
# fuzz.sh: build the libFuzzer targets (fuzz/*_fuzz.cpp) with clang-16 and run each one.
#   ./scripts/fuzz.sh              every target, 1000000 executions each
#   ./scripts/fuzz.sh 20000        every target, 20000 executions each
#   ./scripts/fuzz.sh 1000000 safetensors    one target
#   (targets: wordpiece vocab safetensors bert_encoding attend_case encode_case decode_case)
# Builds in build-fuzz/ with -fsanitize=fuzzer,address,undefined (undefined behaviour aborts).
# The seed corpus is fuzz/corpus/TARGET; what the fuzzer finds goes to build-fuzz/corpus/TARGET,
# so the committed seeds stay as they are. A crash leaves build-fuzz/crash-* and a non-zero exit.
# Not part of scripts/test.sh (too slow for CI); docs/fuzzing.md records the runs.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-1000000}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(wordpiece vocab safetensors bert_encoding attend_case encode_case decode_case)

# libFuzzer's runtime is in Debian's libclang-rt-16-dev (the normal build does not need it)
if ! dpkg-query -W -f='${Status}' libclang-rt-16-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "fuzz: installing libclang-rt-16-dev"
  SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libclang-rt-16-dev >/dev/null
fi

mkdir -p build-fuzz
# attend's page code includes the pages' WebAssembly modules (wasm/meson.build makes page_wasm.hpp
# and page_attend_wasm.hpp); the fuzzed readers write no page, so the headers here hold no module
# and say why
python3 scripts/embed_wasm.py --none "a fuzzing build (scripts/fuzz.sh) has no module" build-fuzz/page_wasm.hpp
python3 scripts/embed_wasm.py --attend --none "a fuzzing build (scripts/fuzz.sh) has no module" build-fuzz/page_attend_wasm.hpp
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -ffp-contract=off -Iinclude -Ibuild-fuzz "-DQKV_VOCAB=\"$PWD/data/bert-base-uncased/vocab.txt\"")
for t in "${targets[@]}"; do
  echo "== fuzz: build $t"
  extra=()  # the case readers include the runtime path: built for the project's default -march,
  # with the command's own file (tools/cmd_NAME.cpp: its heavy part, declared extern in the header)
  [[ $t == *_case ]] && extra=(-march=x86-64-v3 "tools/cmd_${t%_case}.cpp")
  clang++-16 "${flags[@]}" "${extra[@]}" "fuzz/${t}_fuzz.cpp" -o "build-fuzz/${t}_fuzz"
done
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "== fuzz: run $t for $runs executions"
  # -max_len: 4096 bytes is enough to reach every branch (a header, a few tensors, long words)
  (cd build-fuzz && "./${t}_fuzz" -runs="$runs" -max_len=4096 -print_final_stats=1 \
      "corpus/$t" "../fuzz/corpus/$t" 2>&1 | tee "${t}_fuzz.log" | grep -E "^(#[0-9]+ +(INITED|DONE)|Done|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" || true)
  if grep -qE "ERROR|SUMMARY: (Address|Undefined)|deadly signal|runtime error" "build-fuzz/${t}_fuzz.log"; then
    echo "fuzz: $t FOUND A PROBLEM: see build-fuzz/${t}_fuzz.log"; exit 1
  fi
  echo "fuzz: $t: $(grep -m1 -oE 'stat::number_of_executed_units: [0-9]+' "build-fuzz/${t}_fuzz.log"), no finding"
done
