{{/* Labels on every object: deploy/base's part-of, and Helm's own. */}}
{{- define "nodevol.labels" -}}
app.kubernetes.io/part-of: nodevol
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The provisioner's image reference. */}}
{{- define "nodevol.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
