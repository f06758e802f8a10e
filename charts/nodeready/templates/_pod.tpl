{{/*
The agent image: repository@digest when image.digest is set (a release is
signed by digest), else repository:tag, the tag defaulting to appVersion.
*/}}
{{- define "nodeready.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
The nodes an agent runs on, as required node affinity: not verified yet
(config.verifiedLabel DoesNotExist: the release removes the node from the set,
and the DaemonSet controller deletes the agent), and a node nodeready serves:
Linux nodes that run pods from images (the taint-at-creation policy names the
same set).
*/}}
{{- define "nodeready.requiredNodeExpressions" -}}
- key: {{ .Values.config.verifiedLabel }}
  operator: DoesNotExist
- key: kubernetes.io/os
  operator: In
  values: ["linux"]
- key: type
  operator: NotIn
  values: ["virtual-kubelet"]
- key: eks.amazonaws.com/compute-type
  operator: NotIn
  values: ["fargate"]
{{- end -}}

{{/*
The pod's affinity: .Values.affinity with the required node expressions above
in every required node selector term. Terms are ORed and the expressions of a
term ANDed, so each of the user's terms narrows the agent's nodes and none
widens them; with no required terms of the user's, the one term is the
agent's own.
*/}}
{{- define "nodeready.affinity" -}}
{{- $required := include "nodeready.requiredNodeExpressions" . | fromYamlArray -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- $node := get $affinity "nodeAffinity" | default dict -}}
{{- $req := get $node "requiredDuringSchedulingIgnoredDuringExecution" | default dict -}}
{{- $terms := list -}}
{{- range (get $req "nodeSelectorTerms" | default (list dict)) -}}
{{- $terms = append $terms (merge (dict "matchExpressions" (concat $required (get . "matchExpressions" | default list))) (omit . "matchExpressions")) -}}
{{- end -}}
{{- $_ := set $req "nodeSelectorTerms" $terms -}}
{{- $_ = set $node "requiredDuringSchedulingIgnoredDuringExecution" $req -}}
{{- $_ = set $affinity "nodeAffinity" $node -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/*
The network checks of config.checks, for the helm test: they prove the same
from any released node, where a gate would judge the test pod's node. Never
empty: an empty CHECKS would mean the default set.
*/}}
{{- define "nodeready.networkChecks" -}}
{{- $out := list -}}
{{- range .Values.config.checks -}}
{{- if has . (list "dns" "tcp" "http" "apiserver" "endpoints" "podnetwork") -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- join "," ($out | default (list "apiserver")) -}}
{{- end -}}
