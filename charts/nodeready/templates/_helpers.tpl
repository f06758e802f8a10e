{{/*
The name of every object the chart renders, the start of each name, and the
agent's app.kubernetes.io/name: nodeready, as in manifests/, or nameOverride.
The label follows the name, so that two releases with other names never
select each other's pods; with no override it is nodeready's, so moving from
`kubectl apply` to the chart keeps the DaemonSet's (immutable) selector. The
schema and nodeready.validateName refuse a name that is no DNS label or that
would make a derived name longer than 63 characters, rather than cut it.
*/}}
{{- define "nodeready.name" -}}
{{- default .Chart.Name .Values.nameOverride -}}
{{- end -}}

{{/*
Labels of every object: the name manifests/ gives them, and Helm's own
labels. Selectors and the pod template carry only app.kubernetes.io/name, as
in manifests/, so moving from `kubectl apply` to the chart keeps the
DaemonSet's (immutable) selector and its pods.
*/}}
{{- define "nodeready.labels" -}}
app.kubernetes.io/name: {{ include "nodeready.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The agent's ServiceAccount: its name everywhere it is bound or matched. */}}
{{- define "nodeready.serviceAccount" -}}{{ include "nodeready.name" . }}{{- end -}}

{{/* The ServiceAccount as the API server names its user. */}}
{{- define "nodeready.username" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "nodeready.serviceAccount" . }}
{{- end -}}

{{/* The RBAC subject: the agent's ServiceAccount. */}}
{{- define "nodeready.subjects" -}}
subjects:
  - kind: ServiceAccount
    name: {{ include "nodeready.serviceAccount" . }}
    namespace: {{ .Release.Namespace }}
{{- end -}}

{{/*
The namespace of a namespace/name setting; a bare name is in the given
default, as the agent reads it. Call with (list "namespace/name" "default").
*/}}
{{- define "nodeready.namespaceOf" -}}
{{- $ref := index . 0 -}}
{{- if contains "/" $ref -}}{{ first (splitList "/" $ref) }}{{- else -}}{{ index . 1 }}{{- end -}}
{{- end -}}

{{/* EXTRA_TAINTS (key[=value]:effect) as the own-node policy's 'key:effect' strings. */}}
{{- define "nodeready.extraTaintKeys" -}}
{{- range $i, $t := .Values.config.extraTaints -}}
{{- $kv := splitList ":" $t -}}
{{- if $i }}, {{ end }}'{{ splitList "=" (first $kv) | first }}:{{ last $kv }}'
{{- end -}}
{{- end -}}

{{/* EXTRA_TAINTS as the taint-at-creation policy's {'key', 'value', 'effect'} maps. */}}
{{- define "nodeready.extraTaintObjects" -}}
{{- range $i, $t := .Values.config.extraTaints -}}
{{- $kv := splitList ":" $t -}}
{{- $k := splitList "=" (first $kv) -}}
{{- if $i }}, {{ end }}{'key': '{{ first $k }}', 'value': '{{ if gt (len $k) 1 }}{{ last $k }}{{ end }}', 'effect': '{{ last $kv }}'}
{{- end -}}
{{- end -}}
