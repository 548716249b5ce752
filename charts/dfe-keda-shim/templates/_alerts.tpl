{{/* The alert rules, as a Prometheus rules file body (`groups:`). One definition for the
     PrometheusRule and for monitoring/alerts.yaml (the plain file for Prometheus without the
     operator), which a test holds equal to this rendered with the default values.
     Runbooks: docs/operations.md, one section per alert. {{`{{ … }}`}} passes Prometheus'
     own templating through helm untouched. */}}
{{- define "dfe-keda-shim.alertGroups" -}}
{{- $r := .Values.monitoring.rules -}}
{{- $extra := $r.alertLabels | default dict -}}
{{- $base := $r.runbookBaseUrl | trimSuffix "/" -}}
groups:
  - name: dfe-keda-shim
    rules:
      - alert: DfeShimServingHeld
        # Answers keep coming from the fail-safe path (last-good, cold hold, hold) and not one
        # fresh answer for the query: KEDA scales on a value ClickHouse no longer confirms.
        expr: |-
          sum by (namespace, query) (rate(dfe_keda_shim_requests_total{source=~"last_good|cold_hold|hold"}[5m])) > 0
          unless
          sum by (namespace, query) (rate(dfe_keda_shim_requests_total{source="fresh"}[5m])) > 0
        for: {{ printf "%vm" $r.failsafeMinutes }}
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `Query {{ $labels.query }} answered from the fail-safe path only` | quote }}
          description: {{ printf "%s%vm%s" `The shim has served held values for query {{ $labels.query }} (namespace {{ $labels.namespace }}) for over ` $r.failsafeMinutes `, with no fresh answer from ClickHouse.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeShimServingHeld") | nindent 10 }}
      - alert: DfeShimClickHouseFailing
        # Share of the shim's ClickHouse queries that end in error, timeout or a bad result.
        expr: |-
          sum by (namespace, query) (rate(dfe_keda_shim_clickhouse_query_duration_seconds_count{outcome!="success"}[5m]))
          /
          sum by (namespace, query) (rate(dfe_keda_shim_clickhouse_query_duration_seconds_count[5m]))
          > {{ $r.clickhouseFailureRatio }}
        for: {{ printf "%vm" $r.clickhouseFailureMinutes }}
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `ClickHouse queries of {{ $labels.query }} failing` | quote }}
          description: {{ `{{ $value | humanizePercentage }} of the ClickHouse queries for {{ $labels.query }} (namespace {{ $labels.namespace }}) failed over the last 5 minutes.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeShimClickHouseFailing") | nindent 10 }}
      - alert: DfeShimAnsweringStale
        # 503 answers: the held value is older than max_stale_seconds, KEDA's fallback is in charge.
        expr: |-
          sum by (namespace, query) (increase(dfe_keda_shim_requests_total{source="stale"}[5m])) > 0
        for: {{ printf "%vm" $r.staleMinutes }}
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "critical" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `Query {{ $labels.query }} answers 503 (stale): KEDA's fallback decides` | quote }}
          description: {{ `The shim answers 503 for {{ $labels.query }} (namespace {{ $labels.namespace }}): its last good value is past max_stale_seconds, so KEDA uses its fallback (or keeps the replica count).` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeShimAnsweringStale") | nindent 10 }}
      - alert: DfeShimCatalogueReloadRejected
        # The override catalogue changed on disk and did not validate; the old one is still served.
        expr: |-
          sum by (namespace, instance) (increase(dfe_keda_shim_catalogue_reloads_total{result="rejected"}[{{ printf "%vm" $r.reloadRejectedMinutes }}])) > 0
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `A catalogue reload was rejected on {{ $labels.instance }}` | quote }}
          description: {{ printf "%s%vm%s" `The shim at {{ $labels.instance }} (namespace {{ $labels.namespace }}) rejected a catalogue reload in the last ` $r.reloadRejectedMinutes `; it keeps serving the catalogue it had.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeShimCatalogueReloadRejected") | nindent 10 }}
  - name: dfe-hunt-runner
    rules:
      - alert: DfeHuntBacklogGrowing
        # Due, unclaimed hunts keep growing: the runners do not keep up (or do not run).
        expr: |-
          max by (namespace) (dfe_hunt_backlog) >= {{ $r.backlogMinimum }}
          and
          max by (namespace) (deriv(dfe_hunt_backlog[10m])) > 0
        for: {{ printf "%vm" $r.backlogGrowingMinutes }}
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `The hunt backlog keeps growing in {{ $labels.namespace }}` | quote }}
          description: {{ printf "%s%vm%s" `{{ $value }} due hunts wait and the backlog has grown for over ` $r.backlogGrowingMinutes `.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeHuntBacklogGrowing") | nindent 10 }}
      - alert: DfeHuntFireLate
        # p95 of (ClickHouse clock at the starting tick - the fire) above one poll plus the slack.
        expr: |-
          histogram_quantile(0.95, sum by (namespace, le) (rate(dfe_hunt_fire_lateness_seconds_bucket[10m]))) > {{ add .Values.huntRunner.poll $r.fireLatenessSlackSeconds }}
        for: {{ printf "%vm" $r.fireLatenessMinutes }}
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `Hunts start late in {{ $labels.namespace }}` | quote }}
          description: {{ printf "%s%v%s" `95% of hunt runs started more than {{ $value | humanizeDuration }} after their fire (threshold: poll + ` $r.fireLatenessSlackSeconds ` s).` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeHuntFireLate") | nindent 10 }}
      - alert: DfeHuntAutoDisabled
        # The runner disabled a hunt (e.g. repeated MEMORY_LIMIT_EXCEEDED); only `enable` brings it back.
        expr: |-
          max by (namespace, hunt_id, reason) (dfe_hunt_autodisabled) > 0
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `Hunt {{ $labels.hunt_id }} was disabled automatically ({{ $labels.reason }})` | quote }}
          description: {{ `Hunt {{ $labels.hunt_id }} (namespace {{ $labels.namespace }}) no longer runs: it was auto-disabled for {{ $labels.reason }}. It stays off until dfe-hunt-runner enable {{ $labels.hunt_id }}.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeHuntAutoDisabled") | nindent 10 }}
      - alert: DfeHuntCatchupSkipped
        # A run after an outage left out data older than max_catchup (docs/hunts.md#catch-up).
        expr: |-
          sum by (namespace, hunt_id) (increase(dfe_hunt_catchup_skipped_total[1h])) > 0
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `Hunt {{ $labels.hunt_id }} skipped data older than max_catchup` | quote }}
          description: {{ `Hunt {{ $labels.hunt_id }} (namespace {{ $labels.namespace }}) caught up after an outage and left out the range older than its max_catchup; the runner log and hunt_run.skipped_from/skipped_to name the range.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeHuntCatchupSkipped") | nindent 10 }}
      - alert: DfeHuntLeaseLost
        # A run's Keeper lease was taken over while it went on (docs/claim-protocol.md#keeper-mode).
        expr: |-
          sum by (namespace, hunt_id) (increase(dfe_hunt_lease_lost_total[1h])) > 0
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `Hunt {{ $labels.hunt_id }} lost its lease while a run went on` | quote }}
          description: {{ `A run of hunt {{ $labels.hunt_id }} (namespace {{ $labels.namespace }}) found its Keeper lease taken over by another runner after its renewals failed for a whole lease; the taker ran the same window and this run did not commit; its rows were written once if the output table deduplicates.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeHuntLeaseLost") | nindent 10 }}
      - alert: DfeHuntRunnerHeartbeatMissing
        # A live runner that has not written its heartbeat row to ClickHouse for a while.
        expr: |-
          time() - max by (namespace, instance) (dfe_hunt_heartbeat_timestamp_seconds) > {{ mul $r.heartbeatMissingMinutes 60 }}
        for: 1m
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `Hunt runner {{ $labels.instance }} writes no heartbeat` | quote }}
          description: {{ printf "%s%vm%s" `The hunt runner at {{ $labels.instance }} (namespace {{ $labels.namespace }}) has written no heartbeat row to ClickHouse for over ` $r.heartbeatMissingMinutes `.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeHuntRunnerHeartbeatMissing") | nindent 10 }}
      - alert: DfeMaterialiseJobFailed
        # From kube-state-metrics: the post-install/upgrade hook Job gave up.
        expr: |-
          max by (namespace, job_name) (kube_job_failed{condition="true", job_name=~".+-materialise"}) > 0
        labels:
          {{- include "dfe-keda-shim.alertLabels" (dict "severity" "warning" "extra" $extra) | nindent 10 }}
        annotations:
          summary: {{ `The materialise Job {{ $labels.job_name }} failed` | quote }}
          description: {{ `Job {{ $labels.namespace }}/{{ $labels.job_name }} failed: hunt_schedule may not match the hunts of the release.` | quote }}
          {{- include "dfe-keda-shim.runbook" (dict "base" $base "alert" "DfeMaterialiseJobFailed") | nindent 10 }}
{{- end -}}

{{/* severity plus monitoring.rules.alertLabels: (dict "severity" "warning" "extra" $extra) */}}
{{- define "dfe-keda-shim.alertLabels" -}}
severity: {{ .severity }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The runbook section of an alert: its heading's anchor in docs/operations.md. */}}
{{- define "dfe-keda-shim.runbook" -}}
runbook: {{ printf "docs/operations.md#%s" (lower .alert) }}
{{- with .base }}
runbook_url: {{ printf "%s#%s" . (lower $.alert) | quote }}
{{- end }}
{{- end -}}
