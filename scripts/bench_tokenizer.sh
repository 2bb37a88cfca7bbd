#!/bin/sh
# bench_tokenizer.sh: qkv's BERT tokenizer against Hugging Face's Rust library (npm `tokenizers`),
# both on one thread, interleaved (qkv, HF, qkv, HF, ...) on the same text so that a shared,
# loaded machine slows both alike. The text: the repository's docs and examples' prose, one
# paragraph per line, repeated to about 8 MB (bench/make_corpus.py).
#   NODE_PATH=/tmp/hf/node_modules ./scripts/bench_tokenizer.sh [ROUNDS]
# Without NODE_PATH holding `tokenizers`, only qkv runs.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
work=${TMPDIR:-/tmp}/qkv-tokenizer-bench
mkdir -p "$work"
${CXX:-g++} -std=c++20 -O2 -DNDEBUG -I"$here/include" "$here/bench/tokenizer_bench.cpp" -o "$work/tokenizer_bench"
python3 "$here/bench/make_corpus.py" "$here" 8000000 > "$work/corpus.txt"
vocab="$here/data/bert-base-uncased/vocab.txt"
have_hf=0
node -e "require('tokenizers')" 2>/dev/null && have_hf=1
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cpus, $(wc -c < "$work/corpus.txt") bytes"
i=0
while [ "$i" -lt "$rounds" ]; do
  "$work/tokenizer_bench" "$vocab" "$work/corpus.txt"
  if [ "$have_hf" = 1 ]; then
    TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 node "$here/bench/hf_tokenizer_bench.js" "$work/corpus.txt"
  fi
  i=$((i + 1))
done
"$work/tokenizer_bench" "$vocab" "$work/corpus.txt" slow
