#!/usr/bin/env bash
# keda-scale-test.sh — prove on a real cluster that shim -> KEDA -> HPA scales a workload
# out and back in, for BOTH signals the shim serves:
#   pressure: /keda/pressure (metrics-api, metricType Value, hold = target), fed by rows
#             INSERTed into otel_metrics_gauge for a throwaway ServiceName;
#   backlog:  /keda/hunt-backlog (metrics-api, metricType AverageValue), fed by throwaway
#             due rows in hunt_schedule (tombstoned again at the end).
# Each path: a throwaway Deployment (pause image) + ScaledObject, push a high signal, wait
# (bounded) for >= 2 replicas, push a low one, wait (bounded) for scale-in to 1, clean up.
#
# Verdict per path, and the exit code:
#   PASS      scaled out and back in                                       (exit 0 if all pass)
#   FAIL      an error on the path: ScaledObject not Ready, the HPA cannot  (exit 1)
#             read the metric, ClickHouse refused the test rows
#   UNPROVEN  no error seen, but the replica change did not happen in time; (exit 2)
#             the diagnosis prints what the shim answered and the HPA status
#
# Needs: kubectl (context = the target cluster, KEDA installed), curl, and the ClickHouse
# HTTP interface reachable from here (e.g. `kubectl port-forward svc/clickhouse 8123`).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/keda-scale-test.sh [pressure|backlog|both]     (default: both)
       scripts/keda-scale-test.sh --print-manifests pressure|backlog
       scripts/keda-scale-test.sh --print-sql pressure-push|backlog-push|backlog-clear

Environment (defaults in brackets):
  SHIM_SERVICE        Service of the shim                              [dfe-keda-shim-shim]
  SHIM_NAMESPACE      its namespace                                    [dfe]
  SHIM_PORT           its port                                         [8080]
  SHIM_URL            base URL KEDA uses      [http://SHIM_SERVICE.SHIM_NAMESPACE.svc.cluster.local:SHIM_PORT]
  SHIM_AUTH_REF       TriggerAuthentication for the shim (in TEST_NAMESPACE), with
  SHIM_AUTH_MODE      bearer | apiKey | basic                          [none]
  TEST_NAMESPACE      where the throwaway objects go                   [SHIM_NAMESPACE]
  TEST_IMAGE          image of the throwaway pods                      [registry.k8s.io/pause:3.10]
  CLICKHOUSE_URL      ClickHouse HTTP interface reachable from here    (required to run)
  CLICKHOUSE_USER     user allowed to INSERT the test rows             [default]
  CLICKHOUSE_PASSWORD its password (never printed)                     [empty]
  DATA_DATABASE       database of hunt_schedule                        [dfe]
  OTEL_DATABASE       database of the gauge table                      [DATA_DATABASE]
  OTEL_TABLE          the gauge table                                  [otel_metrics_gauge]
  SCALE_OUT_TIMEOUT   seconds to wait for >= 2 replicas                [180]
  SCALE_IN_TIMEOUT    seconds to wait for 1 replica                    [300]
  READY_TIMEOUT       seconds to wait for the ScaledObject to be Ready [90]
EOF
}

SHIM_SERVICE=${SHIM_SERVICE:-dfe-keda-shim-shim}
SHIM_NAMESPACE=${SHIM_NAMESPACE:-dfe}
SHIM_PORT=${SHIM_PORT:-8080}
SHIM_URL=${SHIM_URL:-http://${SHIM_SERVICE}.${SHIM_NAMESPACE}.svc.cluster.local:${SHIM_PORT}}
SHIM_URL=${SHIM_URL%/}
SHIM_AUTH_REF=${SHIM_AUTH_REF:-}
SHIM_AUTH_MODE=${SHIM_AUTH_MODE:-}
TEST_NAMESPACE=${TEST_NAMESPACE:-$SHIM_NAMESPACE}
TEST_IMAGE=${TEST_IMAGE:-registry.k8s.io/pause:3.10}
CLICKHOUSE_URL=${CLICKHOUSE_URL:-}
CLICKHOUSE_USER=${CLICKHOUSE_USER:-default}
CLICKHOUSE_PASSWORD=${CLICKHOUSE_PASSWORD:-}
DATA_DATABASE=${DATA_DATABASE:-dfe}
OTEL_DATABASE=${OTEL_DATABASE:-$DATA_DATABASE}
OTEL_TABLE=${OTEL_TABLE:-otel_metrics_gauge}
SCALE_OUT_TIMEOUT=${SCALE_OUT_TIMEOUT:-180}
SCALE_IN_TIMEOUT=${SCALE_IN_TIMEOUT:-300}
READY_TIMEOUT=${READY_TIMEOUT:-90}

# A run id keeps throwaway names unique, so a leftover from an aborted run never collides.
RUN_ID=${RUN_ID:-$(date +%s)-$$}
PRESSURE_TARGET=50
PRESSURE_SERVICE="keda-scale-test-${RUN_ID}"
PRESSURE_POD="keda-scale-test-pod"
BACKLOG_PREFIX="keda-scale-test-${RUN_ID}"

die() { printf 'keda-scale-test: %s\n' "$*" >&2; exit 64; }
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# Identifiers are checked, then backtick-quoted; values go to ClickHouse as bound parameters.
identifier() {
  [[ $2 =~ ^[A-Za-z0-9_-]+$ ]] || die "$1 must match ^[A-Za-z0-9_-]+\$ (got '$2')"
  # shellcheck disable=SC2016 # literal backticks: ClickHouse identifier quotes, not a command
  printf '`%s`' "$2"
}
[[ $RUN_ID =~ ^[A-Za-z0-9.-]+$ ]] || die "RUN_ID must match ^[A-Za-z0-9.-]+\$ (got '$RUN_ID')"
for n in SCALE_OUT_TIMEOUT SCALE_IN_TIMEOUT READY_TIMEOUT SHIM_PORT; do
  [[ ${!n} =~ ^[0-9]+$ ]] || die "$n must be a whole number of seconds/port (got '${!n}')"
done
case $SHIM_AUTH_MODE in '' | bearer | apiKey | basic) ;; *) die "SHIM_AUTH_MODE must be bearer, apiKey or basic (got '$SHIM_AUTH_MODE')" ;; esac
SCHEDULE_TABLE_SQL="$(identifier DATA_DATABASE "$DATA_DATABASE").\`hunt_schedule\`"
OTEL_TABLE_SQL="$(identifier OTEL_DATABASE "$OTEL_DATABASE").$(identifier OTEL_TABLE "$OTEL_TABLE")"

# ---- SQL (parameters in {name:Type}, bound by ClickHouse) ------------------------------------

sql() {
  case $1 in
    # One gauge point as the OTel exporter stores an OTLP push, pod in service.instance.id.
    pressure-push) cat <<EOF
INSERT INTO ${OTEL_TABLE_SQL} (ResourceAttributes, ServiceName, MetricName, Attributes, StartTimeUnix, TimeUnix, Value, Flags)
SELECT map('service.name', {service:String}, 'service.instance.id', {pod:String}), {service:String}, 'scaling_pressure', map(), now64(9), now64(9), {value:Float64}, 0
EOF
    ;;
    # Hunts that are due now: no watermark, no lease, a fire at the start of this hour.
    backlog-push) cat <<EOF
INSERT INTO ${SCHEDULE_TABLE_SQL} (hunt_id, interval_seconds, phase_offset, enabled)
SELECT concat({prefix:String}, '-', toString(number)), 3600, 0, 1 FROM numbers({count:UInt32})
EOF
    ;;
    # Tombstones, as materialise writes them for hunts that left the config.
    backlog-clear) cat <<EOF
INSERT INTO ${SCHEDULE_TABLE_SQL} (hunt_id, interval_seconds, phase_offset, enabled)
SELECT concat({prefix:String}, '-', toString(number)), 0, 0, 0 FROM numbers({count:UInt32})
EOF
    ;;
    *) die "unknown SQL statement '$1'" ;;
  esac
}

CURL_CONFIG=""
# Credentials go to curl through a private config file, never on a command line.
init_curl_config() {
  CURL_CONFIG=$(mktemp)
  chmod 600 "$CURL_CONFIG"
  printf 'user = "%s:%s"\n' "$CLICKHOUSE_USER" "$CLICKHOUSE_PASSWORD" >"$CURL_CONFIG"
}

# clickhouse STATEMENT name=value...: POST one statement with its bound parameters.
clickhouse() {
  local statement=$1 query="" pair
  shift
  for pair in "$@"; do
    [[ $pair =~ ^[a-z_]+=[A-Za-z0-9_.:-]+$ ]] || die "bad parameter '$pair'"
    query="${query}&param_${pair}"
  done
  sql "$statement" | curl -sS --fail-with-body --max-time 20 -K "$CURL_CONFIG" \
    --data-binary @- "${CLICKHOUSE_URL%/}/?${query#&}"
}

# ---- manifests --------------------------------------------------------------------------------

manifests() {
  local path=$1 name="keda-scale-test-${1}" metric_type url target
  if [ "$path" = pressure ]; then
    metric_type=Value
    target=$PRESSURE_TARGET
    url="${SHIM_URL}/keda/pressure?service=${PRESSURE_SERVICE}&hold=${PRESSURE_TARGET}"
  else
    metric_type=AverageValue
    target=${BACKLOG_TARGET:-1}
    url="${SHIM_URL}/keda/hunt-backlog"
  fi
  cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
  namespace: ${TEST_NAMESPACE}
  labels: {app.kubernetes.io/name: ${name}, app.kubernetes.io/part-of: keda-scale-test}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: ${name}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: ${name}, app.kubernetes.io/part-of: keda-scale-test}
    spec:
      automountServiceAccountToken: false
      enableServiceLinks: false
      terminationGracePeriodSeconds: 1
      securityContext:
        runAsNonRoot: true
        runAsUser: 65535
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: pause
          image: "${TEST_IMAGE}"
          resources:
            requests: {cpu: 1m, memory: 8Mi}
            limits: {memory: 16Mi}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: ${name}
  namespace: ${TEST_NAMESPACE}
  labels: {app.kubernetes.io/part-of: keda-scale-test}
spec:
  scaleTargetRef: {name: ${name}}
  minReplicaCount: 1
  maxReplicaCount: 4
  pollingInterval: 5
  cooldownPeriod: 30
  advanced:
    horizontalPodAutoscalerConfig:
      behavior:
        # No 300 s scale-down stabilisation: the test waits for scale-in, not for defaults.
        scaleDown: {stabilizationWindowSeconds: 0}
  triggers:
    - type: metrics-api
      name: ${path}
      metricType: ${metric_type}
      metadata:
        targetValue: "${target}"
        url: "${url}"
        valueLocation: "value"
EOF
  if [ -n "$SHIM_AUTH_REF" ]; then
    cat <<EOF
        authMode: "${SHIM_AUTH_MODE:-bearer}"
      authenticationRef: {name: ${SHIM_AUTH_REF}}
EOF
  fi
}

# ---- cluster reads ----------------------------------------------------------------------------

replicas() { kubectl -n "$TEST_NAMESPACE" get deployment "keda-scale-test-$1" -o jsonpath='{.spec.replicas}' 2>/dev/null || echo '?'; }

conditions() { # KIND NAME: one "Type=Status (Reason): message" per line
  kubectl -n "$TEST_NAMESPACE" get "$1" "$2" \
    -o jsonpath='{range .status.conditions[*]}{.type}={.status} ({.reason}): {.message}{"\n"}{end}' 2>/dev/null || true
}

# What the shim answers right now, through the API server's service proxy; when that fails
# (a shim outside the cluster, SHIM_URL pointing at it), from SHIM_URL directly.
shim_answer() {
  local route answer
  if [ "$1" = pressure ]; then route="keda/pressure?service=${PRESSURE_SERVICE}&hold=${PRESSURE_TARGET}"; else route="keda/hunt-backlog"; fi
  if ! answer=$(kubectl get --raw "/api/v1/namespaces/${SHIM_NAMESPACE}/services/http:${SHIM_SERVICE}:${SHIM_PORT}/proxy/${route}" 2>&1); then
    answer=$(curl -sS --max-time 5 "${SHIM_URL}/${route}" 2>&1) || true
  fi
  printf '%s' "$answer" | head -c 300 || true
}

hpa_metric() {
  kubectl -n "$TEST_NAMESPACE" get hpa "keda-hpa-keda-scale-test-$1" \
    -o jsonpath='{range .status.currentMetrics[*]}{.external.current.value}{.external.current.averageValue}{" "}{end}' 2>/dev/null || true
}

# Errors on the path make a FAIL; their absence with no replica change an UNPROVEN.
path_error() {
  local so hpa
  so=$(conditions scaledobject "keda-scale-test-$1")
  hpa=$(conditions hpa "keda-hpa-keda-scale-test-$1")
  grep -E '^Ready=False' <<<"$so" || true
  grep -E '^(ScalingActive|AbleToScale)=False' <<<"$hpa" || true
}

diagnose() {
  log "  diagnosis for $1:"
  log "    shim answers:   $(shim_answer "$1")"
  log "    HPA metric:     $(hpa_metric "$1")"
  conditions scaledobject "keda-scale-test-$1" | sed 's/^/      ScaledObject /'
  conditions hpa "keda-hpa-keda-scale-test-$1" | sed 's/^/      HPA /'
}

# wait_for PATH out|in TIMEOUT: 0 when reached, 1 on a path error, 2 on timeout.
wait_for() {
  local path=$1 direction=$2 timeout=$3 start now count errors
  start=$(date +%s)
  while :; do
    count=$(replicas "$path")
    if [ "$direction" = out ] && [[ $count =~ ^[0-9]+$ ]] && [ "$count" -ge 2 ]; then return 0; fi
    if [ "$direction" = in ] && [ "$count" = 1 ]; then return 0; fi
    now=$(date +%s)
    if [ $((now - start)) -ge "$timeout" ]; then
      errors=$(path_error "$path")
      if [ -n "$errors" ]; then log "  path error: $errors"; return 1; fi
      return 2
    fi
    log "  $path: replicas=$count metric=[$(hpa_metric "$path")] waiting for scale-$direction ($((now - start))/${timeout}s)"
    sleep 5
  done
}

wait_ready() {
  local name="keda-scale-test-$1" start
  start=$(date +%s)
  until conditions scaledobject "$name" | grep -q '^Ready=True'; do
    if [ $(($(date +%s) - start)) -ge "$READY_TIMEOUT" ]; then return 1; fi
    sleep 3
  done
}

# ---- signal pumps -----------------------------------------------------------------------------

PUMP_PID=""
# The pressure window is 60 s: keep writing so the series' average follows the pushed value.
start_pump() {
  stop_pump
  (
    while :; do
      clickhouse pressure-push "service=${PRESSURE_SERVICE}" "pod=${PRESSURE_POD}" "value=$1" >/dev/null \
        || log "  pressure push failed"
      sleep 5
    done
  ) &
  PUMP_PID=$!
}
stop_pump() {
  if [ -n "$PUMP_PID" ]; then
    kill "$PUMP_PID" 2>/dev/null || true
    wait "$PUMP_PID" 2>/dev/null || true
    PUMP_PID=""
  fi
}

BACKLOG_COUNT=0
push_signal() { # PATH high|low
  if [ "$1" = pressure ]; then
    if [ "$2" = high ]; then start_pump 100; else start_pump 0; fi
  elif [ "$2" = high ]; then
    clickhouse backlog-push "prefix=${BACKLOG_PREFIX}" "count=${BACKLOG_COUNT}" >/dev/null
  else
    clickhouse backlog-clear "prefix=${BACKLOG_PREFIX}" "count=${BACKLOG_COUNT}" >/dev/null
  fi
}

# ---- one path ---------------------------------------------------------------------------------

# verdict PATH [VALUE]: set or print the verdict of a path (plain variables: bash 3 works too).
verdict() {
  if [ $# -eq 2 ]; then printf -v "verdict_$1" '%s' "$2"; else local v="verdict_$1"; printf '%s' "${!v:-UNPROVEN}"; fi
}

# FAIL for a path error (wait_for returned 1), UNPROVEN for a timeout without one.
verdict_of() { if [ "$1" -eq 1 ]; then echo FAIL; else echo UNPROVEN; fi; }

# push_and_wait PATH LEVEL DIRECTION TIMEOUT WHAT: push the signal, wait for the replica change;
# on failure print the diagnosis and the verdict, and return non-zero.
push_and_wait() {
  local path=$1 level=$2 direction=$3 timeout=$4 what=$5 rc=0
  if ! push_signal "$path" "$level"; then
    log "  ClickHouse refused the test rows"
    verdict "$path" FAIL
    return 1
  fi
  wait_for "$path" "$direction" "$timeout" || rc=$?
  if [ "$rc" -ne 0 ]; then
    log "  no ${what} within ${timeout}s"
    diagnose "$path"
    verdict "$path" "$(verdict_of "$rc")"
    return 1
  fi
}

run_path() {
  local path=$1 rc
  log "== $path: shim -> KEDA -> HPA"
  if [ "$path" = backlog ]; then
    # Pick target T and pushed count N from the live baseline B so that (B+N)/T >= 2 (scale
    # out past the HPA's 10 % tolerance) and B/T <= 1 (scale back in to one).
    local baseline
    baseline=$(shim_answer backlog | sed -n 's/.*"value":\([0-9.]*\).*/\1/p')
    baseline=${baseline%%.*}
    if [[ ! $baseline =~ ^[0-9]+$ ]]; then
      log "  could not read the current backlog through the API server; assuming 0"
      baseline=0
    fi
    BACKLOG_TARGET=$((baseline > 1 ? baseline : 1))
    BACKLOG_COUNT=$((2 * BACKLOG_TARGET + 1))
    log "  baseline backlog $baseline: target $BACKLOG_TARGET per replica, pushing $BACKLOG_COUNT due hunts"
  fi
  if ! manifests "$path" | kubectl apply -f - >/dev/null; then
    log "  kubectl apply of the throwaway Deployment and ScaledObject failed"
    verdict "$path" FAIL
    return
  fi
  if ! wait_ready "$path"; then
    log "  ScaledObject keda-scale-test-$path not Ready after ${READY_TIMEOUT}s"
    diagnose "$path"
    verdict "$path" FAIL
    return
  fi
  push_and_wait "$path" high out "$SCALE_OUT_TIMEOUT" "scale-out to >= 2" || return 0
  log "  scaled out: $(replicas "$path") replicas"
  push_and_wait "$path" low in "$SCALE_IN_TIMEOUT" "scale-in to 1" || return 0
  log "  scaled back in: $(replicas "$path") replica"
  verdict "$path" PASS
}

# shellcheck disable=SC2317 # reached through `trap cleanup EXIT`
cleanup() {
  local status=$?
  stop_pump
  local path
  for path in "${paths[@]}"; do
    # The ScaledObject first: KEDA then removes its HPA and stops polling.
    kubectl -n "$TEST_NAMESPACE" delete "scaledobject/keda-scale-test-$path" "deployment/keda-scale-test-$path" \
      --ignore-not-found --wait=false >/dev/null 2>&1 || log "cleanup: could not delete keda-scale-test-$path objects"
  done
  if [ "$BACKLOG_COUNT" -gt 0 ]; then
    clickhouse backlog-clear "prefix=${BACKLOG_PREFIX}" "count=${BACKLOG_COUNT}" >/dev/null 2>&1 \
      || log "cleanup: could not tombstone the ${BACKLOG_PREFIX}-* schedule rows; remove them by hand"
  fi
  [ -n "$CURL_CONFIG" ] && rm -f "$CURL_CONFIG"
  exit "$status"
}

# ---- main -------------------------------------------------------------------------------------

case ${1:-both} in
  -h | --help) usage; exit 0 ;;
  --print-manifests) [[ ${2:-} =~ ^(pressure|backlog)$ ]] || die "--print-manifests needs pressure or backlog"; manifests "$2"; exit 0 ;;
  --print-sql) sql "${2:-}"; exit 0 ;;
  pressure) paths=(pressure) ;;
  backlog) paths=(backlog) ;;
  both) paths=(pressure backlog) ;;
  *) usage >&2; exit 64 ;;
esac

[ -n "$CLICKHOUSE_URL" ] || die "CLICKHOUSE_URL is required (e.g. kubectl port-forward svc/clickhouse 8123, then http://127.0.0.1:8123)"
command -v kubectl >/dev/null || die "kubectl not found"
command -v curl >/dev/null || die "curl not found"
kubectl get crd scaledobjects.keda.sh >/dev/null 2>&1 || die "KEDA's ScaledObject CRD is not installed in the current kubectl context"

init_curl_config
trap cleanup EXIT
trap 'exit 130' INT TERM

for path in "${paths[@]}"; do
  run_path "$path"
  stop_pump
done

log "== verdicts"
overall=0
for path in "${paths[@]}"; do
  log "  $path: $(verdict "$path")"
  case $(verdict "$path") in
    FAIL) overall=1 ;;
    UNPROVEN) [ "$overall" -eq 0 ] && overall=2 ;;
  esac
done
exit "$overall"
