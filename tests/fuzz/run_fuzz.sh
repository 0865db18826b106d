#!/usr/bin/env bash
# One fuzz test: run_fuzz.sh HARNESS CORPUS REGRESSIONS ARTIFACTS (replay | SECONDS)
#   replay   runs every file of CORPUS and REGRESSIONS once (the inputs that once crashed
#            must not crash again)
#   SECONDS  fuzzes that long, starting from a copy of CORPUS (the committed corpus is never
#            written to)
# Each run's temporary files live in a folder of its own, removed at the end; a crash's
# input is written to ARTIFACTS (crash-<sha1>, leak-..., timeout-..., oom-...).
set -euo pipefail
harness=$1 corpus=$2 regressions=$3 artifacts=$4 what=$5
work=$(mktemp -d "${TMPDIR:-/tmp}/taas-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
mkdir -p "$artifacts"
# the limits of docs/testing.md: 2 GB of memory, 10 s an input
opts=(-rss_limit_mb=2048 -timeout=10 -artifact_prefix="$artifacts/")
# a dictionary of the input's words, where there is one (dict/<harness>.dict)
dict="$(dirname "$(dirname "$corpus")")/dict/$(basename "$corpus").dict"
[ -f "$dict" ] && opts+=(-dict="$dict")
if [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus")" ]; then
  echo "run_fuzz.sh: no seed corpus in $corpus" >&2
  exit 1
fi
if [ "$what" = replay ]; then
  files=("$corpus"/*)
  if [ -d "$regressions" ]; then
    shopt -s nullglob
    files+=("$regressions"/*)
  fi
  echo "replaying ${#files[@]} inputs"
  "$harness" "${opts[@]}" "${files[@]}"  # not exec: the trap removes $work
  exit
fi
mkdir "$work/corpus"
cp -R "$corpus"/. "$work/corpus/"
"$harness" "${opts[@]}" -max_total_time="$what" -print_final_stats=1 "$work/corpus"
