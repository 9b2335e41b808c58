# Celery workers for `make run`, one per class of work: sourced by scripts/run.sh (and its test).
#
# One worker on every queue let a training run hold its processes while evaluations, rollouts and
# validation waited: each class now has its own worker, node name and log.
#   rollouts  rollouts,rewards  max(1, cores - 1) processes, fewer where memory holds fewer
#   training  training          1 (a run takes the machine's cores or its GPU alone)
#   default   default           1 (validation, imports)
# CRUCIBLE_ROLLOUT_CONCURRENCY sets the first worker's processes instead.

ROLLOUT_PROCESS_MIB=${ROLLOUT_PROCESS_MIB:-1536}  # an hf rollout: torch, the bundled model, a sandbox
WORKERS=()

rollout_concurrency() {
  if [ -n "${CRUCIBLE_ROLLOUT_CONCURRENCY:-}" ]; then echo "$CRUCIBLE_ROLLOUT_CONCURRENCY"; return; fi
  local cores avail_mib n
  cores=$(nproc 2>/dev/null || echo 2)
  n=$(( cores > 1 ? cores - 1 : 1 ))
  avail_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo 2>/dev/null || true)
  if [ -n "$avail_mib" ] && [ $(( avail_mib / ROLLOUT_PROCESS_MIB )) -lt "$n" ]; then
    n=$(( avail_mib / ROLLOUT_PROCESS_MIB ))
    [ "$n" -lt 1 ] && n=1
  fi
  echo "$n"
}

# start_worker NAME QUEUES PROCESSES: logs in var/log/celery-NAME.log (its stdout/stderr in .out).
start_worker() {
  local name=$1 queues=$2 processes=$3
  # The hf policy sizes torch threads to the cores each of the worker's processes gets.
  CRUCIBLE_WORKER_CONCURRENCY=$processes "$BIN/celery" -A webapp worker -Q "$queues" \
    --concurrency "$processes" -n "$name@%h" --loglevel INFO --logfile "var/log/celery-$name.log" \
    >"var/log/celery-$name.out" 2>&1 &
  WORKERS+=($!)
  echo "  worker $name: -Q $queues, $processes process(es), log var/log/celery-$name.log"
}

start_workers() {
  start_worker rollouts rollouts,rewards "$(rollout_concurrency)"
  start_worker training training 1
  start_worker default default 1
}

stop_workers() {
  [ ${#WORKERS[@]} -eq 0 ] && return 0
  kill "${WORKERS[@]}" 2>/dev/null || true
  wait "${WORKERS[@]}" 2>/dev/null || true
  return 0
}
