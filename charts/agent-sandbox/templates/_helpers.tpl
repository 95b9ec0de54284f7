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
{{- include "agent-sandbox.text" (list (index . 0) ((index . 0).Files.Get (index . 1))) }}
{{- end }}

{{/* As agent-sandbox.file, of the YAML text given: (list $ text). */}}
{{- define "agent-sandbox.text" -}}
{{- $root := index . 0 -}}
{{- $text := index . 1 | replace "agent-sandbox-system" $root.Release.Namespace -}}
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

{{/*
The router's admission policy (files/router/admission-policy.yaml); with
router.e2b.enabled, changed as config/router/e2b/admission-policy-patch.yaml
changes it in the kustomize bundle: its "test" operations must hold and its
"replace" operations of /spec/validations/N replace that validation.
*/}}
{{- define "agent-sandbox.routerPolicy" -}}
{{- $text := .Files.Get "files/router/admission-policy.yaml" }}
{{- if .Values.router.e2b.enabled }}
{{- $docs := regexSplit "(?m)^---\\s*$" $text -1 }}
{{- $policy := fromYaml (index $docs 0) }}
{{- $vals := $policy.spec.validations }}
{{- range $op := fromYamlArray (.Files.Get "files/router/e2b/admission-policy-patch.yaml") }}
{{- if not (hasPrefix "/spec/validations/" $op.path) }}
{{- fail (printf "the chart cannot apply the router policy patch at %s" $op.path) }}
{{- end }}
{{- $parts := splitList "/" (trimPrefix "/spec/validations/" $op.path) }}
{{- $i := int (first $parts) }}
{{- if eq $op.op "test" }}
{{- $at := index $vals $i }}
{{- if gt (len $parts) 1 }}{{ $at = get $at (index $parts 1) }}{{ end }}
{{- if ne (toJson $at) (toJson $op.value) }}
{{- fail (printf "the router's admission policy no longer has %q at %s" $op.value $op.path) }}
{{- end }}
{{- else if eq $op.op "replace" }}
{{- $next := list }}
{{- range $j, $v := $vals }}
{{- $next = append $next (ternary $op.value $v (eq $j $i)) }}
{{- end }}
{{- $vals = $next }}
{{- end }}
{{- end }}
{{- $_ := set $policy.spec "validations" $vals }}
{{- $text = printf "%s\n---\n%s" (toYaml $policy) (rest $docs | join "---") }}
{{- end }}
{{- include "agent-sandbox.text" (list $ $text) }}
{{- end }}
