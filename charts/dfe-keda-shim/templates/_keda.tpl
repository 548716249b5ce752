{{/*
KEDA 2.17–2.20 ScaledObject pieces shared by the runner's ScaledObject and the pressure trigger
template (docs/chart.md). Each renders nothing at its default, so the default output stays as it was.
*/}}

{{/* The catalogue's default deadline_ms (src/catalogue/types.ts QUERY_DEFAULTS; a chart test holds them equal). */}}
{{- define "dfe-keda-shim.catalogueDeadlineMs" -}}2000{{- end -}}

{{/* KEDA's default HTTP timeout of a metrics-api trigger, ms (src/catalogue/definition.ts; held equal by a chart test). */}}
{{- define "dfe-keda-shim.kedaHttpTimeoutMs" -}}3000{{- end -}}

{{/*
dfe-keda-shim.triggerTimeoutMs (dict "deadlineMs" D "timeoutMs" T "what" W): the metrics-api
trigger's `timeout` metadata (KEDA ≥ 2.20), or "" to leave it out. The shim answers by deadline_ms
(from its cache or the hold when ClickHouse is slow), so KEDA must wait at least that long plus the
way there and back: deadline_ms + 1000. At or under KEDA's own default (3000 ms) nothing is
rendered; an explicit T must exceed D.
*/}}
{{- define "dfe-keda-shim.triggerTimeoutMs" -}}
{{- $deadline := int .deadlineMs -}}
{{- if le $deadline 0 -}}
{{- fail (printf "%s: deadline_ms %v must be above 0" .what .deadlineMs) -}}
{{- end -}}
{{- if not (kindIs "invalid" .timeoutMs) -}}
{{- if le (int .timeoutMs) $deadline -}}
{{- fail (printf "%s: the trigger timeout %v ms must exceed the query's deadline_ms %d, or KEDA gives up before the shim answers" .what .timeoutMs $deadline) -}}
{{- end -}}
{{- int .timeoutMs -}}
{{- else -}}
{{- $derived := add $deadline 1000 -}}
{{- if gt $derived (int (include "dfe-keda-shim.kedaHttpTimeoutMs" .)) -}}{{ $derived }}{{- end -}}
{{- end -}}
{{- end -}}

{{/* dfe-keda-shim.checkName (dict "name" N "what" W): fails the render when N is longer than 63 characters. */}}
{{- define "dfe-keda-shim.checkName" -}}
{{- if gt (len .name) 63 -}}
{{- fail (printf "%s %q is %d characters; KEDA and Kubernetes take at most 63" .what .name (len .name)) -}}
{{- end -}}
{{- end -}}

{{/*
dfe-keda-shim.formulaName (dict "name" N "what" W "formula" F): with a scalingModifiers formula, a
trigger name must be one the formula can refer to (letters, digits, `_`; not starting with a digit).
*/}}
{{- define "dfe-keda-shim.formulaName" -}}
{{- if and .formula (not (regexMatch "^[A-Za-z_][A-Za-z0-9_]*$" .name)) -}}
{{- fail (printf "%s %q cannot be used in the scalingModifiers formula %q: name it with letters, digits and _ only" .what .name .formula) -}}
{{- end -}}
{{- end -}}

{{/* The runner ScaledObject's pause annotations (autoscaling.keda.sh/paused*), each only when set. */}}
{{- define "dfe-keda-shim.pauseAnnotations" -}}
{{- if .paused }}
autoscaling.keda.sh/paused: "true"
{{- end }}
{{- if not (kindIs "invalid" .pausedReplicas) }}
autoscaling.keda.sh/paused-replicas: {{ int .pausedReplicas | toString | quote }}
{{- end }}
{{- if .pausedScaleIn }}
autoscaling.keda.sh/paused-scale-in: "true"
{{- end }}
{{- if .pausedScaleOut }}
autoscaling.keda.sh/paused-scale-out: "true"
{{- end }}
{{- end -}}

{{/*
The runner ScaledObject's spec fields of KEDA 2.17–2.20 (initialCooldownPeriod, idleReplicaCount,
advanced), each only when set, with KEDA's own rules checked at render time.
*/}}
{{- define "dfe-keda-shim.scaledObjectAdvanced" -}}
{{- $as := . -}}
{{- if not (kindIs "invalid" $as.initialCooldownPeriod) }}
initialCooldownPeriod: {{ int $as.initialCooldownPeriod }}
{{- end }}
{{- if not (kindIs "invalid" $as.idleReplicaCount) }}
{{- if ge (int $as.idleReplicaCount) (int $as.minReplicaCount) }}
{{- fail (printf "huntRunner.autoscaling.idleReplicaCount %v must be below minReplicaCount %v (KEDA)" $as.idleReplicaCount $as.minReplicaCount) }}
{{- end }}
idleReplicaCount: {{ int $as.idleReplicaCount }}
{{- end }}
{{- $hpa := $as.advanced.horizontalPodAutoscalerConfig -}}
{{- $sm := $as.advanced.scalingModifiers -}}
{{- if and $sm.formula (not $sm.target) }}
{{- fail "huntRunner.autoscaling.advanced.scalingModifiers.target is required with a formula (KEDA)" }}
{{- end }}
{{- if and (not $sm.formula) (or $sm.target $sm.activationTarget $sm.metricType) }}
{{- fail "huntRunner.autoscaling.advanced.scalingModifiers: target, activationTarget and metricType need a formula" }}
{{- end }}
{{- if and $as.fallback.enabled (eq $as.fallback.behavior "scalingModifiers") (not $sm.formula) }}
{{- fail "huntRunner.autoscaling.fallback.behavior scalingModifiers needs advanced.scalingModifiers.formula" }}
{{- end }}
{{- if $hpa.name }}
{{- include "dfe-keda-shim.checkName" (dict "name" $hpa.name "what" "huntRunner.autoscaling.advanced.horizontalPodAutoscalerConfig.name") }}
{{- end }}
{{- if or $hpa.name $hpa.behavior $sm.formula }}
advanced:
  {{- if or $hpa.name $hpa.behavior }}
  horizontalPodAutoscalerConfig:
    {{- with $hpa.name }}
    name: {{ . | quote }}
    {{- end }}
    {{- with $hpa.behavior }}
    behavior:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  {{- end }}
  {{- if $sm.formula }}
  scalingModifiers:
    formula: {{ $sm.formula | quote }}
    target: {{ $sm.target | toString | quote }}
    {{- with $sm.activationTarget }}
    activationTarget: {{ . | toString | quote }}
    {{- end }}
    {{- with $sm.metricType }}
    metricType: {{ . }}
    {{- end }}
  {{- end }}
{{- end }}
{{- end -}}
