{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "greenshard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release>-<chart> unless the release already contains it. */}}
{{- define "greenshard.fullname" -}}
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

{{/* name-version for the helm.sh/chart label. */}}
{{- define "greenshard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels (immutable on a Deployment: never add to these). */}}
{{- define "greenshard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "greenshard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The recommended labels on every object. */}}
{{- define "greenshard.labels" -}}
helm.sh/chart: {{ include "greenshard.chart" . }}
{{ include "greenshard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: greenshard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels of the controller's objects. */}}
{{- define "greenshard.controllerLabels" -}}
{{ include "greenshard.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "greenshard.controllerSelectorLabels" -}}
{{ include "greenshard.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/* The controller's ServiceAccount name. */}}
{{- define "greenshard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "greenshard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Namespace of the worker Jobs. */}}
{{- define "greenshard.jobNamespace" -}}
{{- default .Release.Namespace .Values.rbac.jobNamespace }}
{{- end }}

{{/* Secret holding tokens and provider keys. */}}
{{- define "greenshard.secretName" -}}
{{- default (printf "%s-secrets" (include "greenshard.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{- define "greenshard.configMapName" -}}
{{- printf "%s-config" (include "greenshard.fullname" .) }}
{{- end }}

{{- define "greenshard.claimName" -}}
{{- default (printf "%s-data" (include "greenshard.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* repository:tag or repository@digest; tag defaults to appVersion. */}}
{{- define "greenshard.image" -}}
{{- $img := index . 0 }}{{- $root := index . 1 }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* URL worker pods use for the status push. */}}
{{- define "greenshard.advertiseUrl" -}}
{{- if .Values.controller.advertiseUrl }}
{{- .Values.controller.advertiseUrl }}
{{- else }}
{{- printf "http://%s.%s.svc.%s:%d" (include "greenshard.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.service.port) }}
{{- end }}
{{- end }}

{{/* Where the controller finds its files. */}}
{{- define "greenshard.configDir" -}}/etc/greenshard/config{{- end }}
{{- define "greenshard.secretDir" -}}/etc/greenshard/secrets{{- end }}
{{- define "greenshard.clustersDir" -}}/etc/greenshard/clusters{{- end }}
{{- define "greenshard.dataDir" -}}/var/lib/greenshard{{- end }}

{{/*
Every namespace of this cluster that worker Jobs run in (the job namespace and
each in-cluster region's own), as a JSON list, for RBAC, the PodMonitor and
the NetworkPolicy.
*/}}
{{- define "greenshard.jobNamespaces" -}}
{{- $default := include "greenshard.jobNamespace" . -}}
{{- $out := list $default -}}
{{- range .Values.regions }}
{{- $cl := .cluster | default dict }}
{{- if and (eq .executor "kubernetes") $cl.inCluster }}
{{- $out = append $out (default $default $cl.namespace) -}}
{{- end }}
{{- end }}
{{- $out | uniq | toJson -}}
{{- end }}
