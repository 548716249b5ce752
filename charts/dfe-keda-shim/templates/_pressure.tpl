{{/*
dfe-keda-shim.pressureTriggers — the triggers an app's ScaledObject includes to scale on its
scaling_pressure gauge (docs/pressure.md) through the shim, with CPU as the default trigger beside it.
KEDA takes the higher of the two.

  triggers:
    {{- include "dfe-keda-shim.pressureTriggers" (dict
          "service" "dfe-loader"
          "shimAddress" "http://dfe-keda-shim-shim.dfe.svc.cluster.local:8080"
          "target" 70) | nindent 4 }}

Parameters:
  service            ServiceName of the app's gauge rows (required)
  shimAddress        base URL of the shim (required for metrics-api; https://… when the shim has kedaShim.tls on)
  triggerType        metrics-api (default) | external | external-push: KEDA's external scaler on the
                     shim's gRPC port (docs/api.md#grpc); external-push wakes a sleeping app at once
  scalerAddress      host:port of the shim's gRPC port (required for external, external-push)
  enableTLS          true when the shim's gRPC port has TLS (external, external-push)
  target             pressure target, 0-100 (default 70)
  cpu                false to leave out the CPU trigger (default true)
  cpuUtilization     CPU utilisation target, percent (default 70)
  authenticationRef  name of a TriggerAuthentication when the shim has auth on (optional)
  authMode           bearer | apiKey | basic, with authenticationRef (optional)
  activationTarget   the trigger's activationTargetValue (default 0; must be below target)
  name               the pressure trigger's name (default scaling-pressure); a scalingModifiers
                     formula in the app's ScaledObject refers to it, so use letters, digits and
                     `_` there (e.g. pressure); at most 63 characters
  cpuName            the CPU trigger's name (default cpu), same rules; a formula cannot use it
                     (KEDA keeps cpu and memory triggers out of formulas, beside its metric)
  deadlineMs         the pressure query's deadline_ms when an override changed it (default the
                     catalogue's 2000): sets the metrics-api trigger's timeout (below)
  timeoutMs          the metrics-api trigger's `timeout` metadata (KEDA ≥ 2.20), ms; must exceed
                     deadlineMs. Default: deadlineMs + 1000, rendered only above KEDA's 3000 ms default

Per-trigger timeout (KEDA ≥ 2.20): the shim answers by deadline_ms from its cache or the hold
when ClickHouse is slow, so KEDA must wait at least deadline_ms plus the way there and back
(1000 ms). At the default deadline_ms that is KEDA's own default (3000 ms) and nothing is rendered.

The pressure trigger is `metricType: Value` (desired = ceil(current × value / target)). A
frozen Value would keep scaling, so the URL carries `hold` = the target: on a ClickHouse
failure the shim answers exactly the target, the neutral value that keeps the current count.

Activation (KEDA's 0 <-> 1, `value > activationTargetValue`): the hold answer (= target) counts
as ACTIVE, so during a ClickHouse failure this trigger wakes a workload at minReplicaCount 0 and
never lets a running one be scaled to zero. That is the fail-safe direction (a metrics outage
must not take capacity away), so activationTargetValue is rendered explicitly as 0. A value at
or above the target is refused: the hold answer would then count as inactive and an outage
could scale the workload to zero. (A sleeping app reports no pressure gauge, so pressure alone
never wakes it; only a hold does.)
*/}}
{{- define "dfe-keda-shim.pressureTriggers" -}}
{{- $service := required "dfe-keda-shim.pressureTriggers: service is required" .service -}}
{{- $type := .triggerType | default "metrics-api" -}}
{{- if not (has $type (list "metrics-api" "external" "external-push")) -}}
{{- fail (printf "dfe-keda-shim.pressureTriggers: triggerType must be metrics-api, external or external-push, not %q" $type) -}}
{{- end -}}
{{- $grpc := ne $type "metrics-api" -}}
{{- $shim := "" -}}
{{- if $grpc -}}
{{- $shim = required (printf "dfe-keda-shim.pressureTriggers: scalerAddress (host:port of the shim's gRPC port) is required with triggerType %s" $type) .scalerAddress -}}
{{- else -}}
{{- $shim = required "dfe-keda-shim.pressureTriggers: shimAddress is required" .shimAddress | trimSuffix "/" -}}
{{- end -}}
{{- $target := 70 -}}
{{- if hasKey . "target" }}{{ $target = .target }}{{ end -}}
{{- $cpuUtilization := 70 -}}
{{- if hasKey . "cpuUtilization" }}{{ $cpuUtilization = .cpuUtilization }}{{ end -}}
{{- $activation := 0 -}}
{{- if hasKey . "activationTarget" }}{{ $activation = .activationTarget }}{{ end -}}
{{- if ge (float64 $activation) (float64 $target) -}}
{{- fail (printf "dfe-keda-shim.pressureTriggers: activationTarget %v must be below target %v (a hold answer equals the target and must count as active, or a ClickHouse outage could scale the workload to zero)" $activation $target) -}}
{{- end -}}
{{- $name := .name | default "scaling-pressure" -}}
{{- $cpuName := .cpuName | default "cpu" -}}
{{- range $what, $n := dict "name" $name "cpuName" $cpuName -}}
{{- include "dfe-keda-shim.checkName" (dict "name" $n "what" (printf "dfe-keda-shim.pressureTriggers: %s" $what)) -}}
{{- end -}}
{{- $timeout := "" -}}
{{- if not $grpc -}}
{{- $timeout = include "dfe-keda-shim.triggerTimeoutMs" (dict "deadlineMs" (.deadlineMs | default (include "dfe-keda-shim.catalogueDeadlineMs" .)) "timeoutMs" .timeoutMs "what" "dfe-keda-shim.pressureTriggers") -}}
{{- end -}}
{{- $cpu := true -}}
{{- if hasKey . "cpu" }}{{ $cpu = .cpu }}{{ end -}}
{{- if $cpu }}
- type: cpu
  name: {{ $cpuName }}
  metricType: Utilization
  metadata:
    value: {{ $cpuUtilization | toString | quote }}
{{- end }}
{{- if $grpc }}
- type: {{ $type }}
  name: {{ $name }}
  metricType: Value
  metadata:
    scalerAddress: {{ $shim | quote }}
    query: "pressure"
    service: {{ $service | quote }}
    hold: {{ $target | toString | quote }}
    targetValue: {{ $target | toString | quote }}
    activationTargetValue: {{ $activation | toString | quote }}
    {{- if .enableTLS }}
    enableTLS: "true"
    {{- end }}
{{- else }}
- type: metrics-api
  name: {{ $name }}
  metricType: Value
  metadata:
    targetValue: {{ $target | toString | quote }}
    activationTargetValue: {{ $activation | toString | quote }}
    url: {{ printf "%s/keda/pressure?service=%s&hold=%v" $shim ($service | urlquery) $target | quote }}
    valueLocation: "value"
    {{- with $timeout }}
    timeout: {{ . | quote }}
    {{- end }}
    {{- with .authMode }}
    authMode: {{ . | quote }}
    {{- end }}
{{- end }}
  {{- with .authenticationRef }}
  authenticationRef:
    name: {{ . }}
  {{- end }}
{{- end -}}
