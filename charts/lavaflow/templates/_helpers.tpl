{{- define "lavaflow.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "lavaflow.dashboardImage" -}}
{{ .Values.dashboard.image.repository | default .Values.image.repository }}:{{ .Values.dashboard.image.tag | default (printf "%s-dashboard" (.Values.image.tag | default .Chart.AppVersion)) }}
{{- end -}}

{{- define "lavaflow.labels" -}}
app.kubernetes.io/name: lavaflow
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "lavaflow.selector" -}}
app.kubernetes.io/name: lavaflow
app.kubernetes.io/component: {{ . }}
{{- end -}}

{{- define "lavaflow.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "lavaflow.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "lavaflow.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef: {fieldPath: metadata.name}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef: {fieldPath: metadata.namespace}
{{- end -}}
