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
{{- printf "%s://%s.%s.svc.%s:%d" (include "greenshard.scheme" .) (include "greenshard.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.service.port) }}
{{- end }}
{{- end }}

{{/* http, or https with tls.enabled. */}}
{{- define "greenshard.scheme" -}}
{{- ternary "https" "http" (.Values.tls.enabled | default false) }}
{{- end }}

{{/*
TLS rules the values must keep (values.schema.json states them too; these
messages are what `helm template --skip-schema-validation` and subchart
users see). Included by deployment.yaml.
*/}}
{{- define "greenshard.validateTls" -}}
{{- $t := .Values.tls -}}
{{- if $t.enabled -}}
{{- $cm := $t.certManager | default dict -}}
{{- if and $t.existingSecret $cm.enabled -}}
{{- fail "tls: set tls.existingSecret or tls.certManager.enabled, not both" -}}
{{- end -}}
{{- if not (or $t.existingSecret $cm.enabled) -}}
{{- fail "tls.enabled: needs tls.existingSecret (a kubernetes.io/tls Secret) or tls.certManager.enabled (a cert-manager Certificate)" -}}
{{- end -}}
{{- if and $cm.enabled (not ($cm.issuerRef | default dict).name) -}}
{{- fail "tls.certManager.issuerRef.name: required with tls.certManager.enabled (the Issuer or ClusterIssuer that signs the certificate)" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The kubernetes.io/tls Secret the controller serves (tls.existingSecret or the Certificate's). */}}
{{- define "greenshard.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "greenshard.fullname" .)) .Values.tls.existingSecret }}
{{- end }}

{{/* The Secret's ca.crt is the bundle clients verify the controller with. */}}
{{- define "greenshard.tlsCa" -}}
{{- if and .Values.tls.enabled .Values.tls.caFromSecret }}true{{ end }}
{{- end }}

{{/* The name Prometheus checks the certificate for (it scrapes the pod IP). */}}
{{- define "greenshard.tlsServerName" -}}
{{- printf "%s.%s.svc" (include "greenshard.fullname" .) .Release.Namespace }}
{{- end }}

{{/* Where the controller finds its files. */}}
{{- define "greenshard.configDir" -}}/etc/greenshard/config{{- end }}
{{- define "greenshard.secretDir" -}}/etc/greenshard/secrets{{- end }}
{{- define "greenshard.clustersDir" -}}/etc/greenshard/clusters{{- end }}
{{- define "greenshard.tlsDir" -}}/etc/greenshard/tls{{- end }}
{{/* The CA bundle (ca.crt), in the controller and in worker pods alike. */}}
{{- define "greenshard.caDir" -}}/etc/greenshard/ca{{- end }}
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
