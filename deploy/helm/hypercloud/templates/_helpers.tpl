{{/* The labels Helm's conventions add on top of the kustomize bases' (the comparison in
cmd/hypercloud/tests/it/deploy_manifests.rs strips exactly these). */}}
{{- define "hypercloud.labels" -}}
app.kubernetes.io/name: hypercloud
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "hypercloud.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end }}

{{/* The Secret holding cloud.conf: the chart's own, or an existing one. */}}
{{- define "hypercloud.cloudConfigSecret" -}}
{{ .Values.existingCloudConfigSecret | default "hypercloud-cloud-config" }}
{{- end }}
