{{/* Names: everything is prefixed with the release's fullname so two releases never collide. */}}
{{- define "tollgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.operatorName" -}}{{ include "tollgate.fullname" . }}-operator{{- end -}}
{{- define "tollgate.webhookName" -}}{{ include "tollgate.fullname" . }}-webhook{{- end -}}
{{- define "tollgate.serverName" -}}{{ include "tollgate.fullname" . }}-server{{- end -}}
{{- define "tollgate.operatorTlsSecret" -}}{{ include "tollgate.fullname" . }}-operator-tls{{- end -}}
{{- define "tollgate.operatorCaConfigMap" -}}{{ include "tollgate.fullname" . }}-operator-ca{{- end -}}
{{- define "tollgate.webhookTlsSecret" -}}{{ include "tollgate.fullname" . }}-webhook-tls{{- end -}}

{{- define "tollgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- /* The webhook configuration's objectSelector excludes pods with this label: Tollgate never injects itself. */}}
app.kubernetes.io/part-of: tollgate
{{- end -}}

{{- define "tollgate.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tollgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "tollgate.sidecarImage" -}}
{{ .Values.sidecar.image.repository }}:{{ .Values.sidecar.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "tollgate.operatorAddress" -}}
{{ include "tollgate.operatorName" . }}.{{ .Release.Namespace }}.svc:{{ .Values.operator.grpcPort }}
{{- end -}}

{{/* Spread replicas over nodes; "hard" makes it a scheduling requirement. */}}
{{- define "tollgate.affinity" -}}
podAntiAffinity:
  {{- if eq .root.Values.podAntiAffinity "hard" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "tollgate.selectorLabels" . | nindent 10 }}
  {{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "tollgate.selectorLabels" . | nindent 12 }}
  {{- end }}
{{- end -}}

{{/* Pod settings shared by both Deployments. */}}
{{- define "tollgate.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "tollgate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "tollgate.podEnv" -}}
- name: POD_NAME
  valueFrom: { fieldRef: { fieldPath: metadata.name } }
- name: POD_NAMESPACE
  valueFrom: { fieldRef: { fieldPath: metadata.namespace } }
{{- end -}}

{{- define "tollgate.redisName" -}}{{ include "tollgate.fullname" . }}-redis{{- end -}}

{{/* The counter store's URL when budgets.store is redis (ADR 1310): the one given, else the release's own. */}}
{{- define "tollgate.redisUrl" -}}
{{- if .Values.budgets.redis.url -}}
{{ .Values.budgets.redis.url }}
{{- else if .Values.budgets.redis.deploy -}}
redis://{{ include "tollgate.redisName" . }}.{{ .Release.Namespace }}.svc:6379
{{- else -}}
{{- fail "budgets.store is redis: set budgets.redis.url to your Redis, or budgets.redis.deploy: true to run one in the release" -}}
{{- end -}}
{{- end -}}
