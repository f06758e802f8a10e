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

{{/*
What the schema cannot say about the pod values: keys the chart owns, and
placement that could leave a node with the startup taint and no agent.
*/}}
{{- define "nodeready.validatePod" -}}
{{- if hasKey (.Values.podLabels | default dict) "app.kubernetes.io/name" -}}
{{- fail "podLabels: app.kubernetes.io/name is the DaemonSet's selector, nodeready; leave it out" -}}
{{- end -}}
{{- if hasKey (.Values.podAnnotations | default dict) "checksum/config" -}}
{{- fail "podAnnotations: checksum/config is the chart's checksum of the configuration, which rolls the agents when it changes; leave it out" -}}
{{- end -}}
{{- range $k, $_ := .Values.podMonitor.labels -}}
{{- if eq $k "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "helm.sh/chart" -}}
{{- fail (printf "podMonitor.labels: %s is one of the labels the chart gives every object; leave it out" $k) -}}
{{- end -}}
{{- end -}}
{{- $own := include "nodeready.configData" . | fromYaml | keys -}}
{{- $own = concat $own (list "NODE_NAME" "POD_NAME" "POD_NAMESPACE" "STATE_DIR" "GOMEMLIMIT") -}}
{{- range $i, $e := .Values.extraEnv -}}
{{- if has $e.name $own -}}
{{- fail (printf "extraEnv[%d].name: %s is set by the chart (the ConfigMap nodeready-config from config, or the pod's downward API), and the policies and the DaemonSet follow config: set it through config instead" $i $e.name) -}}
{{- end -}}
{{- end -}}
{{- with .Values.nodeSelector -}}
{{- if hasKey . $.Values.config.verifiedLabel -}}
{{- fail (printf "nodeSelector: %s is config.verifiedLabel: agents run only on nodes without it, so no node would ever run one" $.Values.config.verifiedLabel) -}}
{{- end -}}
{{- if and (hasKey . "kubernetes.io/os") (ne (get . "kubernetes.io/os") "linux") -}}
{{- fail "nodeSelector: kubernetes.io/os: nodeready serves Linux nodes only (the image is Linux-only)" -}}
{{- end -}}
{{- end -}}
{{- with .Values.affinity -}}
{{- if and $.Values.startupTaintPolicy.enabled .nodeAffinity .nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution -}}
{{- fail "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: with startupTaintPolicy.enabled, the chart's creation-time policy would taint new nodes the agent may not run on, which would keep the taint for good; choose the nodes with nodeSelector, which the policy follows, or taint them another way" -}}
{{- end -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- with get $.Values.affinity $kind -}}
{{- if .requiredDuringSchedulingIgnoredDuringExecution -}}
{{- fail (printf "affinity.%s.requiredDuringSchedulingIgnoredDuringExecution: a required pod (anti-)affinity could keep the agent off a node that carries the startup taint, which would then never be released; use preferredDuringSchedulingIgnoredDuringExecution" $kind) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
