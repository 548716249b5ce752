{{/* Names ------------------------------------------------------------------------------ */}}

{{- define "dfe-keda-shim.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dfe-keda-shim.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<suffix>", kept within the 63-character name limit. */}}
{{- define "dfe-keda-shim.componentName" -}}
{{- $base := include "dfe-keda-shim.fullname" .root | trunc (int (sub 62 (len .suffix))) | trimSuffix "-" -}}
{{- printf "%s-%s" $base .suffix -}}
{{- end -}}

{{- define "dfe-keda-shim.shimName" -}}
{{- include "dfe-keda-shim.componentName" (dict "root" . "suffix" "shim") -}}
{{- end -}}

{{/* The shim's headless Service: one DNS name resolving to every ready shim pod (peer lookups). */}}
{{- define "dfe-keda-shim.shimPeersName" -}}
{{- include "dfe-keda-shim.componentName" (dict "root" . "suffix" "shim-peers") -}}
{{- end -}}

{{- define "dfe-keda-shim.runnerName" -}}
{{- include "dfe-keda-shim.componentName" (dict "root" . "suffix" "hunt-runner") -}}
{{- end -}}

{{/* Labels ----------------------------------------------------------------------------- */}}

{{/* All labels of one component's objects: (dict "root" $ "component" "shim") */}}
{{- define "dfe-keda-shim.labels" -}}
{{ include "dfe-keda-shim.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: dfe-keda-shim
{{- if .root.Chart.AppVersion }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- end }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "shim") */}}
{{- define "dfe-keda-shim.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dfe-keda-shim.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The ServiceAccount every pod of the release runs as: the chart's own (serviceAccount.create),
     or an existing one named by serviceAccount.name, or the namespace's "default". */}}
{{- define "dfe-keda-shim.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dfe-keda-shim.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Image and security ------------------------------------------------------------------ */}}

{{- define "dfe-keda-shim.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Pod-level settings shared by every pod: no service links (they inject
     DFE_KEDA_SHIM_PORT=tcp://…), no API token, non-root. */}}
{{- define "dfe-keda-shim.podCommon" -}}
serviceAccountName: {{ include "dfe-keda-shim.serviceAccountName" . }}
enableServiceLinks: false
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "dfe-keda-shim.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{- define "dfe-keda-shim.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end -}}

{{/* ClickHouse ------------------------------------------------------------------------- */}}

{{/* Env of the ClickHouse connection for one program:
     (dict "root" $ "credentials" .Values.kedaShim.clickhouse) — empty fields inherit clickhouse.* */}}
{{- define "dfe-keda-shim.clickhouseEnv" -}}
{{- $ch := .root.Values.clickhouse -}}
{{- $own := .credentials | default dict -}}
{{- $username := $own.username | default $ch.username -}}
{{- $secret := $own.existingSecret | default $ch.existingSecret -}}
{{- $secretKey := $own.existingSecretKey | default $ch.existingSecretKey | default "password" -}}
{{- if not (or $ch.url $ch.host) }}
{{- fail "clickhouse.url or clickhouse.host is required: the image has no embedded ClickHouse" }}
{{- end }}
- name: DFE_CLICKHOUSE_BACKEND
  value: server
{{- if $ch.url }}
- name: DFE_CLICKHOUSE_URL
  value: {{ $ch.url | quote }}
{{- else }}
- name: DFE_CLICKHOUSE_HOST
  value: {{ $ch.host | quote }}
- name: DFE_CLICKHOUSE_PORT
  value: {{ $ch.port | quote }}
- name: DFE_CLICKHOUSE_SECURE
  value: {{ $ch.secure | quote }}
{{- end }}
- name: DFE_CLICKHOUSE_VERIFY
  value: {{ $ch.verify | quote }}
- name: DFE_CLICKHOUSE_USERNAME
  value: {{ $username | quote }}
{{- if $secret }}
- name: DFE_CLICKHOUSE_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret | quote }}
      key: {{ $secretKey | quote }}
{{- end }}
- name: DFE_CLICKHOUSE_DATA_DATABASE
  value: {{ $ch.dataDatabase | quote }}
{{- if $ch.caCert.existingSecret }}
- name: DFE_CLICKHOUSE_CA_CERT
  value: {{ include "dfe-keda-shim.clickhouseCaFile" .root | quote }}
{{- end }}
{{- with $ch.otelDatabase }}
- name: DFE_KEDA_SHIM_OTEL_DATABASE
  value: {{ . | quote }}
{{- end }}
- name: DFE_CLICKHOUSE_TOPOLOGY
  value: {{ $ch.topology | quote }}
- name: LOG_LEVEL
  value: {{ .root.Values.logLevel | quote }}
{{- end -}}

{{/* The backlog refresh (backlog.refreshSeconds): one value, the same entry in the shim, the
     runner and the schema Job (the schema step creates or drops the view the shim reads). */}}
{{- define "dfe-keda-shim.backlogEnv" -}}
- name: DFE_BACKLOG_REFRESH_SECONDS
  value: {{ .Values.backlog.refreshSeconds | quote }}
{{- end -}}

{{/* The private CA of the ClickHouse server (clickhouse.caCert): a Secret mounted as a
     directory in every pod that talks to ClickHouse, DFE_CLICKHOUSE_CA_CERT naming the file.
     The programs read it once at start: a rotated CA needs a restart. */}}
{{- define "dfe-keda-shim.clickhouseCaFile" -}}
{{- printf "/etc/dfe/clickhouse-ca/%s" .Values.clickhouse.caCert.key -}}
{{- end -}}

{{- define "dfe-keda-shim.clickhouseCaVolume" -}}
- name: clickhouse-ca
  secret:
    secretName: {{ .Values.clickhouse.caCert.existingSecret | quote }}
{{- end -}}

{{- define "dfe-keda-shim.clickhouseCaMount" -}}
- name: clickhouse-ca
  mountPath: /etc/dfe/clickhouse-ca
  readOnly: true
{{- end -}}

{{/* Hunts ------------------------------------------------------------------------------ */}}

{{- define "dfe-keda-shim.huntsConfigMapName" -}}
{{- include "dfe-keda-shim.componentName" (dict "root" . "suffix" "hunts") -}}
{{- end -}}

{{/* Where the programs read hunts: the ConfigMap mount, or git-sync's link. */}}
{{- define "dfe-keda-shim.huntsDir" -}}
{{- if .Values.huntRunner.gitSync.enabled -}}
{{- $sub := .Values.huntRunner.gitSync.subPath | trimPrefix "/" | trimSuffix "/" -}}
{{- if $sub -}}/git/hunts/{{ $sub }}{{- else -}}/git/hunts{{- end -}}
{{- else -}}
/etc/dfe/hunts
{{- end -}}
{{- end -}}

{{- define "dfe-keda-shim.huntsVolumes" -}}
{{- if .Values.huntRunner.gitSync.enabled }}
- name: git
  emptyDir: {}
{{- else }}
- name: hunts
  configMap:
    name: {{ include "dfe-keda-shim.huntsConfigMapName" . }}
{{- end }}
{{- end -}}

{{- define "dfe-keda-shim.huntsMount" -}}
{{- if .Values.huntRunner.gitSync.enabled }}
- name: git
  mountPath: /git
  readOnly: true
{{- else }}
- name: hunts
  mountPath: /etc/dfe/hunts
  readOnly: true
{{- end }}
{{- end -}}

{{/* A git-sync container: (dict "root" $ "name" "git-sync" "oneTime" true) */}}
{{- define "dfe-keda-shim.gitSyncContainer" -}}
{{- $gs := .root.Values.huntRunner.gitSync -}}
{{- if not $gs.repo }}
{{- fail "huntRunner.gitSync.repo is required when huntRunner.gitSync.enabled is true" }}
{{- end }}
- name: {{ .name }}
  image: {{ printf "%s:%s" $gs.image.repository $gs.image.tag | quote }}
  imagePullPolicy: {{ $gs.image.pullPolicy }}
  env:
    - name: GITSYNC_REPO
      value: {{ $gs.repo | quote }}
    - name: GITSYNC_REF
      value: {{ $gs.ref | quote }}
    - name: GITSYNC_ROOT
      value: /git
    # The runner reads /git/hunts: git-sync swaps this symlink atomically on each pull.
    - name: GITSYNC_LINK
      value: hunts
    - name: GITSYNC_PERIOD
      value: {{ printf "%vs" $gs.periodSeconds | quote }}
    - name: GITSYNC_ONE_TIME
      value: {{ .oneTime | quote }}
    - name: HOME
      value: /tmp
  {{- with $gs.existingSecret }}
  envFrom:
    - secretRef:
        name: {{ . | quote }}
  {{- end }}
  securityContext:
    {{- include "dfe-keda-shim.containerSecurityContext" .root | nindent 4 }}
  resources:
    {{- toYaml $gs.resources | nindent 4 }}
  volumeMounts:
    - name: git
      mountPath: /git
    - name: tmp
      mountPath: /tmp
{{- end -}}

{{/* Shim address and auth ---------------------------------------------------------------- */}}

{{/* Base URL of the shim for the chart's ScaledObject: https when this release's shim serves
     TLS (kedaShim.tls); a configured shimAddress is used as given. */}}
{{- define "dfe-keda-shim.shimAddress" -}}
{{- $configured := .Values.huntRunner.autoscaling.shimAddress | trimSuffix "/" -}}
{{- if $configured -}}
{{- $configured -}}
{{- else -}}
{{- $scheme := ternary "https" "http" .Values.kedaShim.tls.enabled -}}
{{- printf "%s://%s.%s.svc.cluster.local:%v" $scheme (include "dfe-keda-shim.shimName" .) .Release.Namespace .Values.kedaShim.port -}}
{{- end -}}
{{- end -}}

{{/* "true" when keda.triggerType talks gRPC to the shim (external, external-push); fails on
     an unknown type and on kedaShim.auth, which KEDA's external scalers cannot send. */}}
{{- define "dfe-keda-shim.grpcOn" -}}
{{- $type := .Values.keda.triggerType -}}
{{- if not (has $type (list "metrics-api" "external" "external-push")) -}}
{{- fail (printf "keda.triggerType must be metrics-api, external or external-push, not %q" $type) -}}
{{- end -}}
{{- if ne $type "metrics-api" -}}
{{- if .Values.kedaShim.auth.enabled -}}
{{- fail (printf "keda.triggerType %s cannot use kedaShim.auth: KEDA's external scalers send no token or key, only a client certificate (use kedaShim.tls.clientAuth)" $type) -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* host:port of the shim's gRPC port for the trigger's scalerAddress: this release's Service
     unless huntRunner.autoscaling.scalerAddress is set. */}}
{{- define "dfe-keda-shim.scalerAddress" -}}
{{- $configured := .Values.huntRunner.autoscaling.scalerAddress -}}
{{- if $configured -}}
{{- $configured -}}
{{- else -}}
{{- printf "%s.%s.svc.cluster.local:%v" (include "dfe-keda-shim.shimName" .) .Release.Namespace .Values.kedaShim.grpcPort -}}
{{- end -}}
{{- end -}}

{{- define "dfe-keda-shim.triggerAuthName" -}}
{{- include "dfe-keda-shim.componentName" (dict "root" . "suffix" "shim-auth") -}}
{{- end -}}

{{/* KEDA metrics-api trigger metadata for the configured auth mode. */}}
{{- define "dfe-keda-shim.authTriggerMetadata" -}}
{{- if .Values.kedaShim.tls.clientAuth.enabled }}
authMode: "tls"
{{- else if .Values.kedaShim.auth.enabled }}
authMode: {{ .Values.kedaShim.auth.mode | quote }}
{{- if eq .Values.kedaShim.auth.mode "apiKey" }}
{{- $k := .Values.kedaShim.auth.apiKey }}
method: {{ $k.method | quote }}
keyParamName: {{ ternary $k.param $k.header (eq $k.method "query") | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Monitoring ------------------------------------------------------------------------- */}}

{{/* "true" when monitoring.coreos.com/v1 objects may be rendered: the cluster serves the API
     (as helm sees it), or monitoring.forceApi says render them anyway (helm template, GitOps). */}}
{{- define "dfe-keda-shim.monitoringApi" -}}
{{- if or .Values.monitoring.forceApi (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}true{{- end -}}
{{- end -}}
