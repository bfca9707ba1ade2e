{{/*
The chart's name, and the resources' full name (at most 63 characters, a
DNS label). The bench's names append "-bench-shards" and more to it, so
they are cut to leave room.
*/}}
{{- define "infer-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "infer-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "infer-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels every resource carries. */}}
{{- define "infer-exporter.labels" -}}
helm.sh/chart: {{ include "infer-exporter.chart" . | quote }}
app.kubernetes.io/name: {{ include "infer-exporter.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end }}

{{/* The selector of the exporter's own pods (mode deployment). */}}
{{- define "infer-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "infer-exporter.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: exporter
{{- end }}

{{/*
The pods that serve the exporter's /metrics: its own in mode deployment,
the inference server's (with the exporter beside it) in mode sidecar.
*/}}
{{- define "infer-exporter.metricsPodSelector" -}}
{{- if eq .Values.mode "sidecar" }}
{{- toYaml .Values.sidecar.podSelector }}
{{- else }}
{{- include "infer-exporter.selectorLabels" . }}
{{- end }}
{{- end }}

{{- define "infer-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "infer-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "infer-exporter.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end }}

{{/* The ConfigMap the exporter reads its configuration from, and its key. */}}
{{- define "infer-exporter.configMapName" -}}
{{- default (printf "%s-config" (include "infer-exporter.fullname" .)) .Values.existingConfigMap }}
{{- end }}

{{- define "infer-exporter.configMapKey" -}}
{{- if .Values.existingConfigMap }}{{ .Values.existingConfigMapKey }}{{ else }}config.yml{{ end }}
{{- end }}

{{/* Whether the exporter reads GPUs through NVML: "true" or "". */}}
{{- define "infer-exporter.nvml" -}}
{{- if kindIs "invalid" .Values.nvml.enabled }}
{{- if eq .Values.mode "sidecar" }}true{{ end }}
{{- else if .Values.nvml.enabled }}true{{ end }}
{{- end }}

{{/*
The exporter's container: the Deployment's, and the sidecar that
NOTES.txt prints for the server's pod (mode sidecar). The same as the
sidecar of deploy/kubernetes/deployment.yaml (e2e/helm_test.go compares
them).
*/}}
{{- define "infer-exporter.container" -}}
- name: infer-exporter
  image: {{ include "infer-exporter.image" . | quote }}
  {{- with .Values.image.pullPolicy }}
  imagePullPolicy: {{ . | quote }}
  {{- end }}
  args:
    - --config.file=/etc/infer_exporter/config.yml
    - --web.listen-address=:9750
    {{- if not (include "infer-exporter.nvml" .) }}
    - --no-collector.nvml
    {{- end }}
    {{- with .Values.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or (include "infer-exporter.nvml" .) .Values.extraEnv }}
  env:
    {{- if include "infer-exporter.nvml" . }}
    # NVML: the NVIDIA container runtime mounts the driver's
    # libnvidia-ml.so.1 and the GPUs for these variables.
    - name: NVIDIA_VISIBLE_DEVICES
      value: {{ .Values.nvml.visibleDevices | quote }}
    - name: NVIDIA_DRIVER_CAPABILITIES
      value: {{ .Values.nvml.driverCapabilities | quote }}
    {{- end }}
    {{- with .Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  ports:
    - name: metrics
      containerPort: 9750
  readinessProbe:
    httpGet:
      path: /-/ready
      port: metrics
  livenessProbe:
    httpGet:
      path: /-/healthy
      port: metrics
  {{- $resources := deepCopy .Values.resources }}
  {{- if and (eq .Values.mode "deployment") .Values.nvml.resources }}
  {{- $_ := set $resources "limits" (merge (deepCopy (default dict $resources.limits)) .Values.nvml.resources) }}
  {{- end }}
  {{- with $resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: infer-exporter-config
      mountPath: /etc/infer_exporter
      readOnly: true
{{- end }}

{{/* The exporter's configuration volume, beside its container. */}}
{{- define "infer-exporter.configVolume" -}}
- name: infer-exporter-config
  configMap:
    name: {{ include "infer-exporter.configMapName" . | quote }}
    items:
      - key: {{ include "infer-exporter.configMapKey" . | quote }}
        path: config.yml
{{- end }}

{{/* The bench's names and labels. */}}
{{- define "infer-exporter.bench.labels" -}}
{{ include "infer-exporter.labels" . }}
app.kubernetes.io/part-of: bench
{{- end }}

{{- define "infer-exporter.bench.shardSelector" -}}
app.kubernetes.io/name: {{ include "infer-exporter.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: bench-shard
{{- end }}

{{- define "infer-exporter.bench.mergeSelector" -}}
app.kubernetes.io/name: {{ include "infer-exporter.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: bench-merge
{{- end }}

{{- define "infer-exporter.bench.claimName" -}}
{{- default (printf "%s-bench-results" (include "infer-exporter.fullname" .)) .Values.bench.results.existingClaim }}
{{- end }}

{{/*
The bench's ConfigMap: its hash in the name, as kustomize's generator
does, so that an edited configuration is a new ConfigMap and never one
changed under a run.
*/}}
{{- define "infer-exporter.bench.configMapName" -}}
{{- if .Values.bench.existingConfigMap }}
{{- .Values.bench.existingConfigMap }}
{{- else }}
{{- printf "%s-bench-%s" (include "infer-exporter.fullname" .) (toYaml .Values.bench.config | sha256sum | trunc 10) }}
{{- end }}
{{- end }}

{{- define "infer-exporter.bench.configMapKey" -}}
{{- if .Values.bench.existingConfigMap }}{{ .Values.bench.existingConfigMapKey }}{{ else }}bench.yml{{ end }}
{{- end }}
