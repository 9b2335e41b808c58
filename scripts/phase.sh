#!/usr/bin/env bash
# One numbered phase of `make setup`: scripts/phase.sh N TOTAL LABEL COMMAND [ARG...]
# Prints "[N/TOTAL] LABEL…" before COMMAND, whose own output streams through as it comes, and
# "[N/TOTAL] LABEL… 3m12s" after it (or "failed after …" with COMMAND's exit status, which it keeps).
set -uo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 N TOTAL LABEL COMMAND [ARG...]" >&2
  exit 2
fi
n=$1 total=$2 label=$3
shift 3

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# 0.4s, 12s, 3m12s: tenths only where a phase is quick enough for them to matter.
took() {
  local ms=$1
  if [ "$ms" -lt 10000 ]; then printf '%d.%ds' $(( ms / 1000 )) $(( ms % 1000 / 100 ))
  elif [ "$ms" -lt 60000 ]; then printf '%ds' $(( ms / 1000 ))
  else printf '%dm%02ds' $(( ms / 60000 )) $(( ms % 60000 / 1000 )); fi
}

echo "[$n/$total] $label…"
start=$(now_ms)
"$@"
status=$?
elapsed=$(took $(( $(now_ms) - start )))
if [ "$status" -eq 0 ]; then
  echo "[$n/$total] $label… $elapsed"
else
  echo "[$n/$total] $label… failed after $elapsed (exit $status)" >&2
fi
exit "$status"
