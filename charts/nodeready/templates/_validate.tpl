{{/*
What values.schema.json cannot say: settings that a chosen check or action
requires, and settings that contradict each other. The agent refuses the same
at start (exit 2); the chart refuses them at install, naming the value.
*/}}
{{- define "nodeready.validate" -}}
{{- $c := .Values.config -}}
{{- range $check, $needs := dict "dns" "dnsTestDomains" "http" "httpURLs" "conditions" "nodeConditions" "resources" "requiredResources" "csi" "csiDrivers" "dra" "draDevices" "command" "checkCommand" -}}
{{- if and (has $check $c.checks) (empty (index $c $needs)) -}}
{{- fail (printf "config.%s: required when config.checks has %s" $needs $check) -}}
{{- end -}}
{{- end -}}
{{- if and $c.daemonSets $c.daemonSetsSelector -}}
{{- fail "config.daemonSetsSelector: limits discovery only: leave it empty when config.daemonSets lists the DaemonSets" -}}
{{- end -}}
{{- if and $c.daemonSets $c.daemonSetsExclude -}}
{{- fail "config.daemonSetsExclude: limits discovery only: leave it empty when config.daemonSets lists the DaemonSets" -}}
{{- end -}}
{{- if and $c.podNetworkHTTPPath (empty $c.podNetworkService) -}}
{{- fail "config.podNetworkHTTPPath: applies to the pods of config.podNetworkService; the cluster DNS pods are asked a DNS query: set config.podNetworkService too, or leave it empty" -}}
{{- end -}}
{{- if and (has "podnetwork" $c.checks) (empty $c.podNetworkService) (empty $c.clusterDNSService) -}}
{{- fail "config.podNetworkService: required when config.checks has podnetwork and config.clusterDNSService is empty" -}}
{{- end -}}
{{- if and $c.deleteFailedNode (eq $c.failureAction "fail-open") -}}
{{- fail "config.deleteFailedNode: true contradicts config.failureAction fail-open: set one of them" -}}
{{- end -}}
{{- if gt (len (last (splitList "/" $c.verifiedLabel))) 54 -}}
{{- fail (printf "config.verifiedLabel: %s: the annotations %s-at and %s-duration that record the release would not be valid keys: keep the name after the / at most 54 characters" $c.verifiedLabel $c.verifiedLabel $c.verifiedLabel) -}}
{{- end -}}
{{- with .Values.labelToTaintPolicy -}}
{{- if and .enabled (empty .rules) -}}
{{- fail "labelToTaintPolicy.rules: list at least one label -> taint rule when labelToTaintPolicy.enabled is true" -}}
{{- end -}}
{{- range $i, $r := .rules -}}
{{- if eq $r.taint.key $c.taintKey -}}
{{- fail (printf "labelToTaintPolicy.rules[%d].taint.key: %s is config.taintKey, the startup taint, which only the agent removes: use startupTaintPolicy for it" $i $r.taint.key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
