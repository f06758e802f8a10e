{{/*
What an upgrade may not change while nodes depend on the installed values.
lookup reads the installed release's ConfigMap and the nodes; without a
cluster (helm template, a client-side dry run) it finds nothing and checks
nothing.

- config.verifiedLabel: the DaemonSet runs an agent on every node without the
  label. A new key would start an agent on every verified node at once.
  Refused while a node carries the old label without the new one.
- config.taintKey, config.taintEffect, config.extraTaints: the agent removes
  only the startup taints it is configured with. A node that carries a taint
  the new values drop would keep it for good: its new agent does not know it.
  Refused while a node carries such a taint.
*/}}
{{- define "nodeready.validateUpgrade" -}}
{{- if .Release.IsUpgrade -}}
{{- $old := lookup "v1" "ConfigMap" .Release.Namespace (printf "%s-config" (include "nodeready.name" $)) -}}
{{- if $old -}}
{{- $was := $old.data | default dict -}}
{{- $c := .Values.config -}}
{{- $nodes := list -}}
{{- $oldLabel := get $was "VERIFIED_LABEL" -}}
{{- $oldTaints := include "nodeready.startupTaintsOf" (list (get $was "TAINT_KEY") (get $was "TAINT_EFFECT") (splitList "," (get $was "EXTRA_TAINTS" | default ""))) | fromJsonArray -}}
{{- $newTaints := include "nodeready.startupTaintsOf" (list $c.taintKey $c.taintEffect $c.extraTaints) | fromJsonArray -}}
{{- $dropped := list -}}
{{- range $oldTaints -}}
{{- if not (has . $newTaints) -}}{{- $dropped = append $dropped . -}}{{- end -}}
{{- end -}}
{{- if or (and $oldLabel (ne $oldLabel $c.verifiedLabel)) $dropped -}}
{{- $nodes = (lookup "v1" "Node" "" "").items | default list -}}
{{- end -}}
{{- if and $oldLabel (ne $oldLabel $c.verifiedLabel) -}}
{{- $unlabelled := list -}}
{{- range $nodes -}}
{{- $l := .metadata.labels | default dict -}}
{{- if and (hasKey $l $oldLabel) (not (hasKey $l $c.verifiedLabel)) -}}
{{- $unlabelled = append $unlabelled .metadata.name -}}
{{- end -}}
{{- end -}}
{{- if $unlabelled -}}
{{- fail (printf "config.verifiedLabel: the installed release uses %s; with %s the DaemonSet would start an agent at once on every node that lacks it, %d now (%s). Give those nodes the new label first, with the old one's value (kubectl label nodes -l %s=true %s=true, and the same for the value failed-open), then upgrade: docs/install.md, \"Changing the label or the startup taint\"" $oldLabel $c.verifiedLabel (len $unlabelled) (include "nodeready.someNames" $unlabelled) $oldLabel $c.verifiedLabel) -}}
{{- end -}}
{{- end -}}
{{- if $dropped -}}
{{- $held := list -}}
{{- range $nodes -}}
{{- $node := . -}}
{{- range ($node.spec.taints | default list) -}}
{{- if and (has (printf "%s:%s" .key .effect) $dropped) (not (has $node.metadata.name $held)) -}}
{{- $held = append $held $node.metadata.name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $held -}}
{{- fail (printf "config.taintKey: the installed release removes the startup taint %s, which these values no longer name (config.taintKey, config.taintEffect, config.extraTaints), and %d nodes carry it now (%s): their new agents would not remove it, and they would stay tainted for good. Let nodeready release them first (or keep the taint in config.extraTaints for this upgrade), and stop whatever puts it on new nodes (a NodePool's startupTaints, kubelet flags, a node pool's taints): docs/install.md, \"Changing the label or the startup taint\"" (join ", " $dropped) (len $held) (include "nodeready.someNames" $held)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The startup taints as "key:effect" strings, a JSON array: TAINT_KEY's, then
EXTRA_TAINTS (key[=value]:effect). Call with (list key effect extraTaints).
*/}}
{{- define "nodeready.startupTaintsOf" -}}
{{- $out := list (printf "%s:%s" (index . 0) (index . 1)) -}}
{{- range (index . 2) -}}
{{- if . -}}
{{- $kv := splitList ":" . -}}
{{- $out = append $out (printf "%s:%s" (first (splitList "=" (first $kv))) (last $kv)) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* At most five names of a list, then how many more. */}}
{{- define "nodeready.someNames" -}}
{{- $n := len . -}}
{{- if gt $n 5 -}}
{{- printf "%s and %d more" (join ", " (slice . 0 5)) (sub $n 5) -}}
{{- else -}}
{{- join ", " . -}}
{{- end -}}
{{- end -}}
