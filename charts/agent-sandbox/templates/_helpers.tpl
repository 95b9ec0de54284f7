{{/* Labels Helm adds to every object's metadata (never to selectors). */}}
{{- define "agent-sandbox.chartLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: agent-sandbox
{{- end }}

{{/* The controller's labels, as config/ sets them, plus the chart's. */}}
{{- define "agent-sandbox.controllerLabels" -}}
app.kubernetes.io/name: agent-sandbox-controller
{{ include "agent-sandbox.chartLabels" . }}
{{- end }}

{{/* The router's labels, as config/router sets them, plus the chart's. */}}
{{- define "agent-sandbox.routerLabels" -}}
app: sandbox-router
{{ include "agent-sandbox.chartLabels" . }}
{{- end }}

{{- define "agent-sandbox.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
A file of files/ (copied from config/ by make generate), its namespace
agent-sandbox-system replaced by the release's, one object per YAML
document, each with the chart's labels added. Call with (list $ path).
*/}}
{{- define "agent-sandbox.file" -}}
{{- $root := index . 0 -}}
{{- $text := $root.Files.Get (index . 1) | replace "agent-sandbox-system" $root.Release.Namespace -}}
{{- range $doc := regexSplit "(?m)^---\\s*$" $text -1 }}
{{- $obj := fromYaml $doc }}
{{- if $obj.kind }}
{{- $meta := $obj.metadata }}
{{- $_ := set $meta "labels" (merge (dict) ($meta.labels | default dict) (include "agent-sandbox.chartLabels" $root | fromYaml)) }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}

{{/* The cluster's policy modes, bundle: mode, as --policy-bundles sets them. */}}
{{- define "agent-sandbox.policyModes" -}}
{{- if .Values.policyBundles }}
{{- range $b := list "runtime-isolation" "baseline" "restricted" }}
{{ $b }}: {{ index $.Values.policyBundles $b | default "off" | quote }}
{{- end }}
{{- else }}
runtime-isolation: enforce
baseline: enforce
restricted: "off"
{{- end }}
{{- end }}

{{/* --policy-bundles from policyBundles, sorted; empty for the default. */}}
{{- define "agent-sandbox.policyBundlesFlag" -}}
{{- $parts := list }}
{{- range $b := keys .Values.policyBundles | sortAlpha }}
{{- $parts = append $parts (printf "%s=%s" $b (index $.Values.policyBundles $b)) }}
{{- end }}
{{- join "," $parts }}
{{- end }}
