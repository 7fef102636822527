{{/* Chart name, truncated to a DNS label. */}}
{{- define "winpool.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: the release name, prefixed by the chart name unless it already
contains it. Cluster-scoped objects (ClusterRole, ClusterRoleBinding) carry it,
so two releases never share them.
*/}}
{{- define "winpool.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "winpool.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "winpool.selectorLabels" -}}
app.kubernetes.io/name: {{ include "winpool.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "winpool.labels" -}}
helm.sh/chart: {{ include "winpool.chart" . }}
{{ include "winpool.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: winpool
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "winpool.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "winpool.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
An image's name from {registry, repository}: global.image.registry, the
air-gapped mirror, replaces the image's own registry. Call with
(dict "image" .Values.image "context" $).
*/}}
{{- define "winpool.imageName" -}}
{{- $registry := dig "image" "registry" "" .context.Values.global | default .image.registry }}
{{- if $registry }}{{ printf "%s/%s" $registry .image.repository }}{{ else }}{{ .image.repository }}{{ end }}
{{- end }}

{{/*
An image reference from {registry, repository, tag, digest}: the digest wins
over the tag, an empty tag is the chart's appVersion. Called as imageName.
*/}}
{{- define "winpool.imageRef" -}}
{{- $name := include "winpool.imageName" . }}
{{- if .image.digest }}
{{- printf "%s@%s" $name .image.digest }}
{{- else }}
{{- printf "%s:%s" $name (default .context.Chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/* Pull secrets: global.imagePullSecrets, then those of one image's pods. */}}
{{- define "winpool.pullSecrets" -}}
{{- toJson (concat (dig "imagePullSecrets" list .context.Values.global) .secrets) }}
{{- end }}

{{/* Refuse combinations the schema cannot express. */}}
{{- define "winpool.validate" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicaCount) 1) }}
{{- fail "leaderElection.enabled=false needs replicaCount: 1; two replicas without a leader would both write" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled .Values.serviceMonitor.podMonitor }}
{{- fail "serviceMonitor.enabled and serviceMonitor.podMonitor both scrape the operator: choose one (every series would be counted twice)" }}
{{- end }}
{{- end }}

{{/*
One scrape endpoint of the operator's admin port, for the ServiceMonitor and
the PodMonitor alike. The alert rules (files/alerts.yaml) select
job=<jobLabel>: without the first relabeling the job label would be the
Service's (or the PodMonitor's) name.
*/}}
{{- define "winpool.scrapeEndpoint" -}}
- port: metrics
  path: /metrics
  interval: {{ .Values.serviceMonitor.interval }}
  {{- with .Values.serviceMonitor.scrapeTimeout }}
  scrapeTimeout: {{ . }}
  {{- end }}
  {{- with .Values.serviceMonitor.scheme }}
  scheme: {{ . }}
  {{- end }}
  {{- with .Values.serviceMonitor.tlsConfig }}
  tlsConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .Values.serviceMonitor.honorLabels }}
  honorLabels: true
  {{- end }}
  relabelings:
    - action: replace
      targetLabel: job
      replacement: {{ .Values.serviceMonitor.jobLabel | quote }}
    {{- with .Values.serviceMonitor.relabelings }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.serviceMonitor.metricRelabelings }}
  metricRelabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
The agent's ServiceAccount. A fixed interface, not a value: the operator
names it in every agent DaemonSet it creates, and the admission policy
recognises the agent by it.
*/}}
{{- define "winpool.agentServiceAccountName" -}}
winpool-agent
{{- end }}

{{/* The username the API server gives the agent's tokens. */}}
{{- define "winpool.agentUsername" -}}
{{- printf "system:serviceaccount:%s:%s" .Values.agentNamespace (include "winpool.agentServiceAccountName" .) }}
{{- end }}
