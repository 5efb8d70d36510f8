{{/* Names, labels and the pieces every pod shares. */}}

{{- define "agentq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agentq.fullname" -}}
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

{{/* A component's resource name: (dict "root" $ "component" "api") */}}
{{- define "agentq.componentName" -}}
{{- printf "%s-%s" (include "agentq.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agentq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentq.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "agentq.labels" -}}
{{ include "agentq.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: agentq
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "agentq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "agentq.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "agentq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "agentq.redisHost" -}}
{{- include "agentq.componentName" (dict "root" . "component" "redis") -}}
{{- end -}}

{{/* AGENTQ_REDIS_URL: from the external Secret, or the bundled Redis (with its password). */}}
{{- define "agentq.redisEnv" -}}
{{- if eq .Values.redis.mode "external" }}
- name: AGENTQ_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "redis.external.existingSecret is required when redis.mode is external" .Values.redis.external.existingSecret }}
      key: {{ .Values.redis.external.key }}
{{- else if .Values.redis.bundled.auth.existingSecret }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.bundled.auth.existingSecret }}
      key: {{ .Values.redis.bundled.auth.key }}
- name: AGENTQ_REDIS_URL
  value: {{ printf "redis://:$(REDIS_PASSWORD)@%s:6379/0" (include "agentq.redisHost" .) | quote }}
{{- else }}
- name: AGENTQ_REDIS_URL
  value: {{ printf "redis://%s:6379/0" (include "agentq.redisHost" .) | quote }}
{{- end }}
{{- end -}}

{{/* Environment every agentq container gets. */}}
{{- define "agentq.commonEnv" -}}
{{ include "agentq.redisEnv" . }}
{{- if .Values.mcpConfig }}
- name: AGENTQ_MCP_CONFIG
  value: /etc/agentq/mcp.json
{{- end }}
{{- if .Values.models }}
- name: AGENTQ_MODELS
  value: /etc/agentq/models.json
{{- end }}
{{- if .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.otel.endpoint | quote }}
{{- end }}
{{- range $key, $value := .Values.env }}
- name: {{ $key }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "agentq.providerKeysEnvFrom" -}}
{{- if .Values.providerKeys.existingSecret }}
envFrom:
  - secretRef:
      name: {{ .Values.providerKeys.existingSecret }}
{{- end }}
{{- end -}}

{{/* Rolls pods when their configuration changes. */}}
{{- define "agentq.configChecksum" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- end -}}

{{- define "agentq.podSecurity" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
serviceAccountName: {{ include "agentq.serviceAccountName" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* /tmp and the config files: the root filesystem is read-only. */}}
{{- define "agentq.volumes" -}}
- name: tmp
  emptyDir: {}
{{- if or .Values.mcpConfig .Values.models .Values.api.agents }}
- name: config
  configMap:
    name: {{ include "agentq.fullname" . }}
{{- end }}
{{- end -}}

{{- define "agentq.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if or .Values.mcpConfig .Values.models .Values.api.agents }}
- name: config
  mountPath: /etc/agentq
  readOnly: true
{{- end }}
{{- end -}}

{{/* A pool's values over poolDefaults: (dict "root" $ "pool" $pool) */}}
{{- define "agentq.pool" -}}
{{- toYaml (mergeOverwrite (deepCopy .root.Values.poolDefaults) (deepCopy .pool)) -}}
{{- end -}}

{{- define "agentq.dnsEgress" -}}
- to:
    - namespaceSelector:
        {{- toYaml .Values.networkPolicy.dns.namespaceSelector | nindent 8 }}
  ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
{{- end -}}

{{- define "agentq.redisEgress" -}}
{{- if eq .Values.redis.mode "bundled" }}
- to:
    - podSelector:
        matchLabels:
          {{- include "agentq.selectorLabels" (dict "root" . "component" "redis") | nindent 10 }}
  ports:
    - {port: 6379, protocol: TCP}
{{- else }}
{{- range .Values.redis.external.egress }}
- to:
    - ipBlock:
        cidr: {{ .cidr }}
  ports:
    {{- range .ports }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "agentq.otelEgress" -}}
{{- with .Values.otel.egress }}
{{ toYaml . }}
{{- end }}
{{- end -}}
