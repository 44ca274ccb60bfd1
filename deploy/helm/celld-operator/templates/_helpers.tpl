{{/* The labels Helm adds to every object, beside the ones deploy/ sets. */}}
{{- define "celld-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The operator's image: the tag defaults to the chart's appVersion. */}}
{{- define "celld-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The namespaces a `namespaced` operator manages, in order and without repeats: watchNamespaces
then watchNamespace. It fails when there is none. */}}
{{- define "celld-operator.watchNamespaces" -}}
{{- $all := concat (.Values.watchNamespaces | default list) (compact (list .Values.watchNamespace)) | uniq }}
{{- if not $all }}
{{- fail "namespaceMode namespaced needs the namespaces to manage: set watchNamespaces (a list) or watchNamespace" }}
{{- end }}
{{- join "," $all }}
{{- end }}
