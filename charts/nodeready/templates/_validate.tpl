{{/*
What values.schema.json cannot say: settings that a chosen check or action
requires, and settings that contradict each other. The agent refuses the same
at start (exit 2); the chart refuses them at install, naming the value.
*/}}
{{- define "nodeready.validate" -}}
{{- with .Values.nameOverride -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .) -}}
{{- fail (printf "nameOverride: %q: must be a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit): it starts the name of every object" .) -}}
{{- end -}}
{{- if gt (len .) 46 -}}
{{- fail (printf "nameOverride: %s: must be at most 46 characters, so that the longest name it starts, %s-uninstall-events, stays within 63" . .) -}}
{{- end -}}
{{- end -}}
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
{{- if and (has "networkpolicy" $c.checks) (not .Values.networkPolicyCanary.enabled) (empty $c.networkPolicyCanary) -}}
{{- fail "networkPolicyCanary.enabled: required when config.checks has networkpolicy (or config.networkPolicyCanary naming a canary NetworkPolicy of your own): without its canary the check holds every node as misconfigured" -}}
{{- end -}}
{{- if and $c.deleteFailedNode (eq $c.failureAction "fail-open") -}}
{{- fail "config.deleteFailedNode: true contradicts config.failureAction fail-open: set one of them" -}}
{{- end -}}
{{- if lt (include "nodeready.seconds" $c.clockMaxSkew | float64) 2.0 -}}
{{- fail (printf "config.clockMaxSkew: %s: must be at least 2s: the API server's Date counts whole seconds, so a smaller skew cannot be told" $c.clockMaxSkew) -}}
{{- end -}}
{{- $fleetWindow := include "nodeready.seconds" $c.fleetWindow | float64 -}}
{{- if or (lt $fleetWindow 60.0) (gt $fleetWindow 86400.0) -}}
{{- fail (printf "config.fleetWindow: %s: must be between 1m and 24h" $c.fleetWindow) -}}
{{- end -}}
{{- if gt (include "nodeready.seconds" $c.settleTime | float64) 15.0 -}}
{{- fail (printf "config.settleTime: %s: must be at most 15s, below the pod's termination grace period" $c.settleTime) -}}
{{- end -}}
{{- if gt (include "nodeready.seconds" $c.metricsFinalScrapeTimeout | float64) 24.0 -}}
{{- fail (printf "config.metricsFinalScrapeTimeout: %s: must be at most 24s, inside the pod's termination grace period after the SIGTERM" $c.metricsFinalScrapeTimeout) -}}
{{- end -}}
{{- if lt (include "nodeready.seconds" $c.retryBackoffMax | float64) (include "nodeready.seconds" $c.retryBackoffBase | float64) -}}
{{- fail (printf "config.retryBackoffMax: %s: must not be shorter than config.retryBackoffBase (%s)" $c.retryBackoffMax $c.retryBackoffBase) -}}
{{- end -}}
{{- $taints := list (printf "%s:%s" $c.taintKey $c.taintEffect) -}}
{{- range $c.extraTaints -}}
{{- $t := printf "%s:%s" (first (splitList "=" (first (splitList ":" .)))) (last (splitList ":" .)) -}}
{{- if has $t $taints -}}
{{- fail (printf "config.extraTaints: %s is named twice (config.taintKey and config.taintEffect name the first taint)" $t) -}}
{{- end -}}
{{- $taints = append $taints $t -}}
{{- end -}}
{{- if eq $c.taintOwner "external" -}}
{{- if $c.extraTaints -}}
{{- fail "config.extraTaints: names taints nodeready removes, and with config.taintOwner external it removes none: leave it empty" -}}
{{- end -}}
{{- if $c.reverifyTaint -}}
{{- fail "config.reverifyTaint: puts the startup taint back, and with config.taintOwner external that taint is another controller's: leave it false" -}}
{{- end -}}
{{- if eq $c.failureAction "fail-open" -}}
{{- fail "config.failureAction: fail-open releases a node by removing the taint, and with config.taintOwner external its owner removes it only when node-ready/Verified is True: use keep-tainted or replace-node" -}}
{{- end -}}
{{- end -}}
{{- if $c.reverifyTaint -}}
{{- range $taints -}}
{{- if hasSuffix ":NoExecute" . -}}
{{- fail (printf "config.reverifyTaint: with the startup taint %s it would evict the workloads of a node being verified again: use NoSchedule, or leave config.reverifyTaint false" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $c.checkCommandArgs (empty $c.checkCommand) -}}
{{- fail "config.checkCommandArgs: arguments of config.checkCommand, which is not set" -}}
{{- end -}}
{{- range $values, $sep := dict "nodeConditions" "=" "requiredResources" ">=" -}}
{{- $seen := list -}}
{{- range index $c $values -}}
{{- $k := trim (first (splitList $sep .)) -}}
{{- if has $k $seen -}}
{{- fail (printf "config.%s: %s is named twice" $values $k) -}}
{{- end -}}
{{- $seen = append $seen $k -}}
{{- end -}}
{{- end -}}
{{- $devices := list -}}
{{- range $c.draDevices -}}
{{- $spec := trim (first (splitList ">=" .)) -}}
{{- $driver := trim (first (splitList "[" $spec)) -}}
{{- $k := $driver -}}
{{- if contains "[" $spec -}}
{{- $inner := splitList "=" (trimSuffix "]" (last (splitList "[" $spec))) -}}
{{- $attr := trim (first $inner) -}}
{{- if not (contains "/" $attr) -}}
{{- $attr = printf "%s/%s" $driver $attr -}}
{{- end -}}
{{- $k = printf "%s[%s=%s]" $driver $attr (trim (join "=" (rest $inner))) -}}
{{- end -}}
{{- if has $k $devices -}}
{{- fail (printf "config.draDevices: %s is named twice" $k) -}}
{{- end -}}
{{- $devices = append $devices $k -}}
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
{{- if has (printf "%s:%s" $r.taint.key $r.taint.effect) $taints -}}
{{- fail (printf "labelToTaintPolicy.rules[%d].taint: %s:%s is one of config.extraTaints, a startup taint the agent removes: the rule would put it back on verified nodes, held with no agent left" $i $r.taint.key $r.taint.effect) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The seconds of a Go duration (10s, 1h30m, 500ms), for comparing durations.
*/}}
{{- define "nodeready.seconds" -}}
{{- $units := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "μs" 1e-6 "ms" 1e-3 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)" . -1 -}}
{{- $unit := regexFind "(ns|us|µs|μs|ms|s|m|h)$" . -}}
{{- $total = addf $total (mulf (trimSuffix $unit . | float64) (get $units $unit)) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
What the schema cannot say about the pod values: keys the chart owns, and
placement that could leave a node with the startup taint and no agent.
*/}}
{{- define "nodeready.validatePod" -}}
{{- if hasKey (.Values.podLabels | default dict) "app.kubernetes.io/name" -}}
{{- fail (printf "podLabels: app.kubernetes.io/name is the DaemonSet's selector, %s; leave it out" (include "nodeready.name" .)) -}}
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
{{- fail (printf "extraEnv[%d].name: %s is set by the chart (the ConfigMap %s-config from config, or the pod's downward API), and the policies and the DaemonSet follow config: set it through config instead" $i $e.name (include "nodeready.name" $)) -}}
{{- end -}}
{{- end -}}
{{- $volumes := list -}}
{{- range $i, $v := .Values.extraVolumes -}}
{{- if has $v.name (list "state" "api-token") -}}
{{- fail (printf "extraVolumes[%d].name: %s is a volume of the chart's own (the agent's state, its API token); choose another name" $i $v.name) -}}
{{- end -}}
{{- $volumes = append $volumes $v.name -}}
{{- end -}}
{{- range $i, $m := .Values.extraVolumeMounts -}}
{{- if not (has $m.name $volumes) -}}
{{- fail (printf "extraVolumeMounts[%d].name: %s is none of extraVolumes" $i $m.name) -}}
{{- end -}}
{{- range $own := list "/run/nodeready" "/var/run/secrets/kubernetes.io/serviceaccount" -}}
{{- if or (eq (trimSuffix "/" $m.mountPath) $own) (hasPrefix (printf "%s/" $own) $m.mountPath) -}}
{{- fail (printf "extraVolumeMounts[%d].mountPath: %s is where the chart mounts the agent's own %s; choose another path" $i $m.mountPath $own) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $i, $c := .Values.initContainers -}}
{{- if eq $c.name "nodeready" -}}
{{- fail (printf "initContainers[%d].name: nodeready is the agent container's name; choose another" $i) -}}
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
