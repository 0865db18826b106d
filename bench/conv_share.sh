#!/bin/bash
# The direct convolution's share of the machine's FMA peak (issue 19): for each kernel set,
# the peak (taas-fma-peak) just before and after, and between them the layer alone
# (taas-train-bench --mode layer) RUNS times; prints the median GFLOP/s and its share of the
# mean of the two peaks. The default layer is the docs/design.md §1 second convolution with
# its ReLU, batch 64.
#
#   bench/conv_share.sh [--build DIR] [--threads T] [--runs N] [--sets "avx512 avx2"]
#                       [--model FILE --input C,H,W]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build" threads=2 runs=5 sets="" model="" input="32,26,26"
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=$2 ;;
    --threads) threads=$2 ;;
    --runs) runs=$2 ;;
    --sets) sets=$2 ;;
    --model) model=$2 ;;
    --input) input=$2 ;;
    *) echo "conv_share.sh: unknown option $1 (see the comment at its top)" >&2; exit 2 ;;
    esac
    shift 2
done
peak_bin="$build/bench/taas-fma-peak" layer_bin="$build/bench/taas-train-bench"
for b in "$peak_bin" "$layer_bin"; do
    [ -x "$b" ] || { echo "conv_share.sh: $b is not built (cmake --build $build)" >&2; exit 1; }
done
if [ -z "$model" ]; then
    model=$(mktemp --suffix=.json)
    trap 'rm -f "$model"' EXIT
    echo '{"type": "Sequential", "layers": [{"type": "Conv2d", "in_channels": 32, "out_channels": 64,
           "kernel_size": 3}, {"type": "ReLU"}]}' > "$model"
fi
# the sets this CPU has, best first, unless given
[ -n "$sets" ] || sets=$("$peak_bin" --threads 1 | sed -n 's/.*"set": "\([a-z0-9]*\)".*/\1/p' | tr '\n' ' ')
peak() { "$peak_bin" --threads "$threads" | sed -n "s/.*\"set\": \"$1\".*\"gflops\": \([0-9.]*\).*/\1/p"; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo "| set | threads | peak before / after (GFLOP/s) | layer GFLOP/s, median of $runs (range) | share of the peak |"
echo "|---|---:|---:|---:|---:|"
for set in $sets; do
    before=$(peak "$set")
    figures=$(for _ in $(seq "$runs"); do
        TAAS_CPU=$set "$layer_bin" --model "$model" --input "$input" --mode layer --batch 64 --steps 60 \
            --threads "$threads" | sed -n 's/.*"gflops": \([0-9.]*\).*/\1/p'
    done)
    after=$(peak "$set")
    med=$(echo "$figures" | median)
    range=$(echo "$figures" | sort -n | sed -n '1p;$p' | tr '\n' ' ' | awk '{printf "%s–%s", $1, $2}')
    share=$(awk -v m="$med" -v a="$before" -v b="$after" 'BEGIN {printf "%.0f %%", 200 * m / (a + b)}')
    echo "| $set | $threads | $before / $after | $med ($range) | $share |"
done
