package chart_test

import (
	"encoding/json"
	"github.com/nodeready/nodeready/e2e/framework/chart"

	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// helmLabels are the labels the chart adds to every object's metadata beyond those of
// manifests/, with their values for a release of the chart. Selectors and the pod template
// carry none of them, so that the DaemonSet's immutable selector and its pods stay those of
// `kubectl apply -f manifests/`. The comparisons check each and then leave them out.
func helmLabels(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chart.Dir(t), "Chart.yaml"))
	require.NoError(t, err)
	var meta struct{ Name, Version, AppVersion string }
	require.NoError(t, yaml.Unmarshal(data, &meta))
	return map[string]string{
		"app.kubernetes.io/instance":   chart.Release,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/version":    meta.AppVersion,
		"helm.sh/chart":                meta.Name + "-" + meta.Version,
	}
}

// template renders the chart as `helm install -n kube-system` would, with the given flags.
func template(t *testing.T, flags ...string) (string, error) {
	t.Helper()
	args := append([]string{"template", chart.Release, chart.Dir(t), "--namespace", framework.Namespace}, flags...)
	return chart.RunHelm(t, args...)
}

// render runs helm template with the flags and returns the release's objects with helmLabels
// checked and removed; hooks and the configuration's checksum are left out (chartOwned).
func render(t *testing.T, flags ...string) map[string]chart.Object {
	t.Helper()
	out, err := template(t, flags...)
	require.NoError(t, err)
	objects := chartOwned(t, chart.ParseObjects(t, "helm template", []byte(out)))
	want := helmLabels(t)
	for key, o := range objects {
		labels, _ := o["metadata"].(map[string]any)["labels"].(map[string]any)
		for k, v := range want {
			assert.Equal(t, v, labels[k], "%s: label %s", key, k)
			delete(labels, k)
		}
	}
	return objects
}

// assertSameObjects holds got to exactly the objects of want, field by field.
func assertSameObjects(t *testing.T, want, got map[string]chart.Object) {
	t.Helper()
	assert.ElementsMatch(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "objects")
	for k, w := range want {
		if g, ok := got[k]; ok {
			assert.Equal(t, w, g, "%s differs from manifests/", k)
		}
	}
}

// TestDefaultsRenderManifests: with default values the chart renders exactly the objects of
// manifests/*.yaml, which `kubectl apply -f manifests/` installs.
func TestDefaultsRenderManifests(t *testing.T) {
	assertSameObjects(t, chart.ManifestObjects(t, "*.yaml"), render(t))
}

// TestSwitches: each switch adds exactly the objects of its optional part of manifests/.
func TestSwitches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		files []string
	}{
		{"gates.daemonSets", []string{"--set", "gates.daemonSets.enabled=true"}, []string{"gates/daemonsets.yaml"}},
		{"gates.csi", []string{"--set", "gates.csi.enabled=true"}, []string{"gates/csi.yaml"}},
		{"gates.dra", []string{"--set", "gates.dra.enabled=true"}, []string{"gates/dra.yaml"}},
		{"networkPolicyCanary", []string{"--set", "networkPolicyCanary.enabled=true"}, []string{"networkpolicy/canary.yaml"}},
		{"replaceNode", []string{"--set", "replaceNode.enabled=true"}, []string{"replace-node/*.yaml"}},
		{"startupTaintPolicy", []string{"--set", "startupTaintPolicy.enabled=true"}, []string{"node-creation/startup-taint.yaml"}},
		{"labelToTaintPolicy", []string{"--set", "labelToTaintPolicy.enabled=true", "--set-json", dedicatedRule}, []string{"label-to-taint/label-to-taint.yaml"}},
		{"podMonitor", []string{"--set", "podMonitor.enabled=true"}, []string{"monitoring/podmonitor.yaml"}},
		{"alerts", []string{"--set", "alerts.enabled=true"}, []string{"monitoring/prometheusrule.yaml"}},
		{"grafanaDashboard", []string{"--set", "grafanaDashboard.enabled=true"}, []string{"monitoring/grafana-dashboard.yaml"}},
		{"all", allSwitches, []string{"gates/*.yaml", "networkpolicy/*.yaml", "replace-node/*.yaml", "node-creation/*.yaml", "label-to-taint/*.yaml", "monitoring/*.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// podMonitor.enabled brings the ConfigMap nodeready-monitoring of
			// monitoring/podmonitor.yaml: scraped agents wait for a last scrape, as after
			// kubectl apply -f manifests/monitoring/ and with the monitoring component.
			want := chart.ManifestObjects(t, append([]string{"*.yaml"}, tc.files...)...)
			if slices.Contains(tc.flags, dedicatedRule) {
				tolerateRule(t, want)
			}
			assertSameObjects(t, want, render(t, tc.flags...))
		})
	}
}

// tolerateRule adds to the DaemonSet of want what the chart adds for dedicatedRule, after the
// startup taint's toleration: the rule's taint, which `kubectl apply -f manifests/` users
// add themselves (manifests/label-to-taint/README.md).
func tolerateRule(t *testing.T, want map[string]chart.Object) {
	t.Helper()
	ds := want["apps/v1 DaemonSet kube-system/nodeready"]
	require.NotNil(t, ds)
	spec := ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	tolerations := spec["tolerations"].([]any)
	rule := map[string]any{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}
	spec["tolerations"] = append([]any{tolerations[0], rule}, tolerations[1:]...)
}

// dedicatedRule is the rule of manifests/label-to-taint/, values.yaml's commented example:
// labelToTaintPolicy.rules is empty by default.
const dedicatedRule = `labelToTaintPolicy.rules=[{"label":"dedicated","value":"ci","taint":{"key":"dedicated","value":"ci","effect":"NoSchedule"}}]`

// allSwitches turns on every optional part.
var allSwitches = []string{
	"--set", "gates.daemonSets.enabled=true", "--set", "gates.csi.enabled=true", "--set", "gates.dra.enabled=true",
	"--set", "networkPolicyCanary.enabled=true",
	"--set", "replaceNode.enabled=true", "--set", "startupTaintPolicy.enabled=true",
	"--set", "labelToTaintPolicy.enabled=true", "--set-json", dedicatedRule, "--set", "podMonitor.enabled=true", "--set", "alerts.enabled=true",
	"--set", "grafanaDashboard.enabled=true",
}

// TestLint: helm lint --strict passes with the defaults and with every switch on.
func TestLint(t *testing.T) {
	for name, flags := range map[string][]string{"defaults": nil, "every switch on": allSwitches} {
		t.Run(name, func(t *testing.T) {
			out, err := chart.RunHelm(t, append([]string{"lint", "--strict", chart.Dir(t)}, flags...)...)
			require.NoError(t, err, out)
			assert.Contains(t, out, "1 chart(s) linted, 0 chart(s) failed")
		})
	}
}

// TestSettingsCoverConfigMap: the settings table, the ConfigMap of manifests/, values.yaml's
// config and the schema's config name the same settings, and the schema requires each.
func TestSettingsCoverConfigMap(t *testing.T) {
	settings := chart.Values()
	var values []string
	for _, v := range settings {
		values = append(values, v)
	}
	cm := chart.ManifestObjects(t, "02-configmap.yaml")["v1 ConfigMap kube-system/nodeready-config"]
	require.NotNil(t, cm)
	assert.ElementsMatch(t, slices.Collect(maps.Keys(cm["data"].(map[string]any))), slices.Collect(maps.Keys(settings)))

	var chartValues struct {
		Config map[string]any `json:"config"`
	}
	data, err := os.ReadFile(filepath.Join(chart.Dir(t), "values.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &chartValues))
	assert.ElementsMatch(t, values, slices.Collect(maps.Keys(chartValues.Config)), "values.yaml config")

	var schema struct {
		Properties struct {
			Config struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			} `json:"config"`
		} `json:"properties"`
	}
	data, err = os.ReadFile(filepath.Join(chart.Dir(t), "values.schema.json"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &schema))
	assert.ElementsMatch(t, values, slices.Collect(maps.Keys(schema.Properties.Config.Properties)), "values.schema.json config")
	assert.ElementsMatch(t, values, schema.Properties.Config.Required, "values.schema.json config required")
}

// TestBadValuesFail: a bad value stops helm before anything is rendered, with a message
// that names the value and what is wrong with it.
func TestBadValuesFail(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{"config.settleTime=five", []string{"/config/settleTime", "'five' does not match pattern"}},
		{"config.taintEffect=Sometimes", []string{"/config/taintEffect", "'NoSchedule', 'PreferNoSchedule', 'NoExecute'"}},
		{"config.verifiedLabel=node ready", []string{"/config/verifiedLabel", "'node ready' does not match pattern"}},
		{"config.taintKey=a/b/c", []string{"/config/taintKey", "'a/b/c' does not match pattern"}},
		{"config.initialTimeout=0s", []string{"/config/initialTimeout", "'0s' does not match pattern"}},
		{"config.maxRetries=0", []string{"/config/maxRetries", "minimum: got 0, want 1"}},
		{"config.metricsPort=80800", []string{"/config/metricsPort", "maximum"}},
		{"config.checks={dns,dsn}", []string{"/config/checks/1", "value must be one of 'dns'"}},
		{"config.retryBackoff=fibonacci", []string{"/config/retryBackoff", "value must be one of 'exponential'"}},
		{"config.failureAction=reboot", []string{"/config/failureAction", "value must be one of 'keep-tainted'"}},
		{"config.endpointsService=Default/Kubernetes", []string{"/config/endpointsService", "does not match pattern"}},
		{"config.tcpTargets={10.0.0.1}", []string{"/config/tcpTargets/0", "'10.0.0.1' does not match pattern"}},
		{"config.enableMetrics=yes", []string{"/config/enableMetrics", "got string, want boolean"}},
		{"config.setleTime=5s", []string{"/config", "'setleTime' not allowed"}},
		{"podMonitor.enabled=maybe", []string{"/podMonitor/enabled", "got string, want boolean"}},
		{"labelToTaintPolicy.rules[0].value=blue green", []string{"/labelToTaintPolicy/rules/0/value", "'blue green' does not match pattern"}},
		{"labelToTaintPolicy.rules[0].label=a/b/c", []string{"/labelToTaintPolicy/rules/0/label", "'a/b/c' does not match pattern"}},
		{"labelToTaintPolicy.rules[0].taint.effect=Sometimes", []string{"/labelToTaintPolicy/rules/0/taint/effect", "'NoSchedule', 'PreferNoSchedule', 'NoExecute'"}},
		{"labelToTaintPolicy.rules[0].taint.key=x'y", []string{"/labelToTaintPolicy/rules/0/taint/key", "does not match pattern"}},
		{"labelToTaintPolicy.label=dedicated", []string{"/labelToTaintPolicy", "'label' not allowed"}},
		{"image.pullPolicy=Sometimes", []string{"/image/pullPolicy", "value must be one of 'IfNotPresent'"}},
		// What the schema cannot say, the templates refuse.
		{"config.checks={dns,http}", []string{"config.httpURLs: required when config.checks has http"}},
		{"config.checks={csi}", []string{"config.csiDrivers: required when config.checks has csi"}},
		{"config.checks={dra}", []string{"config.draDevices: required when config.checks has dra"}},
		{"config.draDevices={gpu.nvidia.com>=0}", []string{"/config/draDevices/0", "does not match pattern"}},
		{"config.checks={command}", []string{"config.checkCommand: required when config.checks has command"}},
		{"config.podNetworkNodes=0", []string{"/config/podNetworkNodes", "minimum: got 0, want 1"}},
		{"config.podNetworkHTTPPath=healthz", []string{"/config/podNetworkHTTPPath", "does not match pattern"}},
		{"config.podNetworkHTTPPath=/healthz", []string{"config.podNetworkHTTPPath: applies to the pods of config.podNetworkService"}},
		{"config.checks={podnetwork},config.clusterDNSService=", []string{"config.podNetworkService: required when config.checks has podnetwork"}},
		{"config.checks={networkpolicy}", []string{"networkPolicyCanary.enabled: required when config.checks has networkpolicy"}},
		{"config.networkPolicyCanary=Kube-System/canary", []string{"networkPolicyCanary"}},
		{"config.networkPolicyCanary=a/b/c", []string{"networkPolicyCanary"}},
		{"config.daemonSets={kube-system/cilium},config.daemonSetsSelector=tier=node", []string{"config.daemonSetsSelector: limits discovery only"}},
		{"config.deleteFailedNode=true,config.failureAction=fail-open", []string{"config.deleteFailedNode: true contradicts config.failureAction fail-open"}},
		// Comparisons of durations, which the agent refuses too (docs/install.md).
		{"config.retryBackoffBase=1m,config.retryBackoffMax=30s", []string{"config.retryBackoffMax: 30s: must not be shorter than config.retryBackoffBase (1m)"}},
		{"config.settleTime=20s", []string{"config.settleTime: 20s: must be at most 15s"}},
		{"config.metricsFinalScrapeTimeout=25s", []string{"config.metricsFinalScrapeTimeout: 25s: must be at most 24s"}},
		{"config.verifiedLabel=example.com/" + strings.Repeat("v", 55), []string{"config.verifiedLabel: example.com/vvv", "at most 54 characters"}},
		{"labelToTaintPolicy.enabled=true,labelToTaintPolicy.rules=[]", []string{"labelToTaintPolicy.rules: list at least one"}},
		{`labelToTaintPolicy.rules=[{"label":"pool","value":"ci","taint":{"key":"node-ready/unverified","effect":"NoSchedule"}}]`,
			[]string{"labelToTaintPolicy.rules[0].taint.key: node-ready/unverified is config.taintKey"}},
	} {
		t.Run(tc.set, func(t *testing.T) {
			flag := "--set"
			if strings.Contains(tc.set, "[]") || strings.Contains(tc.set, "[{") {
				flag = "--set-json" // a list value
			}
			out, err := template(t, flag, tc.set)
			require.Error(t, err, "rendered:\n%s", out)
			assert.Empty(t, out)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// decode converts a parsed object into its API type.
func decode[T any](t *testing.T, objects map[string]chart.Object, key string) *T {
	t.Helper()
	o, ok := objects[key]
	require.True(t, ok, "no %s among %v", key, slices.Sorted(maps.Keys(objects)))
	data, err := yaml.Marshal(o)
	require.NoError(t, err)
	var v T
	require.NoError(t, yaml.Unmarshal(data, &v))
	return &v
}

// celString is the CEL string literal the policies hold a key in.
func celString(s string) string { return "'" + s + "'" }

// TestLabelAndTaintFollowValues: the verified label and the startup taint, set once in the
// values, change the ConfigMap, the DaemonSet's node affinity, the own-node admission policy
// and both taint-at-creation policies together.
func TestLabelAndTaintFollowValues(t *testing.T) {
	label, labelValue := "example.com/ready", "yes"
	taint := corev1.Taint{Key: "example.com/unready", Value: "pending", Effect: corev1.TaintEffectNoExecute}
	objects := render(t,
		"--set", "config.verifiedLabel="+label, "--set", "config.verifiedLabelValue="+labelValue,
		"--set", "config.taintKey="+taint.Key, "--set", "config.taintValue="+taint.Value,
		"--set", "config.taintEffect="+string(taint.Effect), "--set", "startupTaintPolicy.enabled=true",
		"--set", "config.extraTaints={readiness.k8s.io/nodeready-unverified=true:NoSchedule,startup-taint.cluster-autoscaler.kubernetes.io/nodeready:NoSchedule}",
		"--set", "labelToTaintPolicy.enabled=true", "--set-json", dedicatedRule,
		"--set", "alerts.enabled=true", "--set", "grafanaDashboard.enabled=true")

	cm := decode[corev1.ConfigMap](t, objects, "v1 ConfigMap kube-system/nodeready-config")
	assert.Equal(t, label, cm.Data["VERIFIED_LABEL"])
	assert.Equal(t, labelValue, cm.Data["VERIFIED_LABEL_VALUE"])
	assert.Equal(t, taint.Key, cm.Data["TAINT_KEY"])
	assert.Equal(t, taint.Value, cm.Data["TAINT_VALUE"])
	assert.Equal(t, string(taint.Effect), cm.Data["TAINT_EFFECT"])
	assert.Equal(t, "readiness.k8s.io/nodeready-unverified=true:NoSchedule,startup-taint.cluster-autoscaler.kubernetes.io/nodeready:NoSchedule", cm.Data["EXTRA_TAINTS"])

	ds := decode[appsv1.DaemonSet](t, objects, "apps/v1 DaemonSet kube-system/nodeready")
	terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Len(t, terms, 1)
	assert.Contains(t, terms[0].MatchExpressions, corev1.NodeSelectorRequirement{Key: label, Operator: corev1.NodeSelectorOpDoesNotExist})
	for _, e := range terms[0].MatchExpressions {
		assert.NotEqual(t, wellknown.VerifiedLabel, e.Key, "the default label is still in the affinity")
	}
	tolerated := slices.ContainsFunc(ds.Spec.Template.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), &taint, false) })
	assert.True(t, tolerated, "the agent pod does not tolerate %v", taint)

	vap := decode[admissionv1.ValidatingAdmissionPolicy](t, objects, "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy /nodeready-own-node")
	assertVariables(t, vap.Spec.Variables, map[string]string{
		"labelKey": celString(label), "taintKey": celString(taint.Key), "taintEffect": celString(string(taint.Effect)),
		"extraTaints": "['readiness.k8s.io/nodeready-unverified:NoSchedule', 'startup-taint.cluster-autoscaler.kubernetes.io/nodeready:NoSchedule']",
	})

	map_ := decode[admissionv1.MutatingAdmissionPolicy](t, objects, "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy /nodeready-startup-taint")
	assertVariables(t, map_.Spec.Variables, map[string]string{
		"taintKey": celString(taint.Key), "taintValue": celString(taint.Value), "taintEffect": celString(string(taint.Effect)),
		"extraTaints": "[{'key': 'readiness.k8s.io/nodeready-unverified', 'value': 'true', 'effect': 'NoSchedule'}, " +
			"{'key': 'startup-taint.cluster-autoscaler.kubernetes.io/nodeready', 'value': '', 'effect': 'NoSchedule'}]",
	})
	binding := decode[admissionv1.MutatingAdmissionPolicyBinding](t, objects, "admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding /nodeready-startup-taint")
	assert.Contains(t, binding.Spec.MatchResources.ObjectSelector.MatchExpressions,
		metav1LabelSelectorRequirement(label), "a node created already verified is skipped")

	// The label-to-taint rules leave the startup taint alone, whatever its key.
	l2t := decode[admissionv1.MutatingAdmissionPolicy](t, objects, "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy /nodeready-label-to-taint")
	assertVariables(t, l2t.Spec.Variables, map[string]string{"startupTaintKey": celString(taint.Key)})

	// The alerts select the taint and the label, as kube-state-metrics exports them.
	rule, err := yaml.Marshal(objects["monitoring.coreos.com/v1 PrometheusRule kube-system/nodeready"])
	require.NoError(t, err)
	assert.Contains(t, string(rule), `kube_node_spec_taint{key="example.com/unready", effect="NoExecute"}`)
	assert.Regexp(t, `kube_node_labels\{\s*label_example_com_ready\s*=~"yes\|failed-open"\}`, string(rule), "NodeReadyNodeNotVerified")
	assert.Regexp(t, `kube_node_labels\{\s*label_example_com_ready\s*="failed-open"\}`, string(rule), "NodeReadyFailedOpen")
	assert.Contains(t, string(rule), `remove its label "example.com/ready"`)
	for _, old := range []string{wellknown.StartupTaint().Key, wellknown.VerifiedLabel, "node_ready_verified"} {
		assert.NotContains(t, string(rule), old)
	}

	// So do the dashboard's queries.
	cm = decode[corev1.ConfigMap](t, objects, "v1 ConfigMap kube-system/nodeready-dashboard")
	dashboard := cm.Data["nodeready.json"]
	require.True(t, json.Valid([]byte(dashboard)), "the dashboard is JSON")
	assert.Contains(t, dashboard, `kube_node_spec_taint{key=\"example.com/unready\", effect=\"NoExecute\"}`)
	assert.Contains(t, dashboard, `kube_node_labels{label_example_com_ready=~\"yes|failed-open\"}`, "Not verified")
	assert.Contains(t, dashboard, `kube_node_labels{label_example_com_ready=\"failed-open\"}`, "Failed open")
	for _, old := range []string{wellknown.StartupTaint().Key, "node_ready_verified"} {
		assert.NotContains(t, dashboard, old)
	}
}

// TestGrafanaDashboardPlacement: the dashboard's ConfigMap goes where the sidecar looks, with
// the labels and annotations it selects by.
func TestGrafanaDashboardPlacement(t *testing.T) {
	objects := render(t, "--set", "grafanaDashboard.enabled=true", "--set", "grafanaDashboard.namespace=monitoring",
		"--set", "grafanaDashboard.labels.grafana_dashboard=nodeready", "--set", "grafanaDashboard.annotations.grafana_folder=Nodes")
	cm := objects["v1 ConfigMap monitoring/nodeready-dashboard"]
	require.NotNil(t, cm, "the dashboard in grafanaDashboard.namespace")
	meta := cm["metadata"].(map[string]any)
	assert.Equal(t, map[string]any{"app.kubernetes.io/name": "nodeready", "grafana_dashboard": "nodeready"}, meta["labels"])
	assert.Equal(t, map[string]any{"grafana_folder": "Nodes"}, meta["annotations"])
}

// TestLabelToTaintRules: labelToTaintPolicy.rules, a list, becomes the policy's rules
// variable, one CEL map per pair, in the layout of manifests/label-to-taint/ (which
// TestSwitches holds the default rule to); a taint without a value gets an empty one.
func TestLabelToTaintRules(t *testing.T) {
	objects := render(t, "--set", "labelToTaintPolicy.enabled=true",
		"--set", "labelToTaintPolicy.rules[0].label=dedicated", "--set", "labelToTaintPolicy.rules[0].value=ci",
		"--set", "labelToTaintPolicy.rules[0].taint.key=dedicated", "--set", "labelToTaintPolicy.rules[0].taint.value=ci",
		"--set", "labelToTaintPolicy.rules[0].taint.effect=NoSchedule",
		"--set", "labelToTaintPolicy.rules[1].label=example.com/pool", "--set", "labelToTaintPolicy.rules[1].value=gpu",
		"--set", "labelToTaintPolicy.rules[1].taint.key=nvidia.com/gpu",
		"--set", "labelToTaintPolicy.rules[1].taint.effect=NoExecute")
	mp := decode[admissionv1.MutatingAdmissionPolicy](t, objects, "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy /nodeready-label-to-taint")
	assertVariables(t, mp.Spec.Variables, map[string]string{"rules": "[\n" +
		"  {'label': 'dedicated', 'value': 'ci', 'taintKey': 'dedicated', 'taintValue': 'ci', 'taintEffect': 'NoSchedule'},\n" +
		"  {'label': 'example.com/pool', 'value': 'gpu', 'taintKey': 'nvidia.com/gpu', 'taintValue': '', 'taintEffect': 'NoExecute'}\n" +
		"]"})
}

// TestAlertLabels: the labels a Prometheus's ruleSelector picks are added to the rule's.
func TestAlertLabels(t *testing.T) {
	objects := render(t, "--set", "alerts.enabled=true", "--set", "alerts.labels.release=kube-prometheus-stack")
	rule := objects["monitoring.coreos.com/v1 PrometheusRule kube-system/nodeready"]
	require.NotNil(t, rule)
	assert.Equal(t, map[string]any{"app.kubernetes.io/name": "nodeready", "release": "kube-prometheus-stack"}, rule["metadata"].(map[string]any)["labels"])
}

// assertVariables holds each named variable to its expression.
func assertVariables(t *testing.T, got []admissionv1.Variable, want map[string]string) {
	t.Helper()
	byName := map[string]string{}
	for _, v := range got {
		byName[v.Name] = v.Expression
	}
	for name, expr := range want {
		assert.Equal(t, expr, byName[name], "variable %s", name)
	}
}

// TestNamespaceFollowsRelease: installed into another namespace, the ServiceAccount, every
// binding's subject and the admission policies' user follow it, and the Roles of the
// endpoints and dns checks follow the Services the values name.
func TestNamespaceFollowsRelease(t *testing.T) {
	const ns = "nodeready-system"
	out, err := chart.RunHelm(t, "template", chart.Release, chart.Dir(t), "--namespace", ns, "--set", "replaceNode.enabled=true",
		"--set", "config.endpointsService=backends/api", "--set", "config.clusterDNSService=dns/coredns")
	require.NoError(t, err)
	objects := chartOwned(t, chart.ParseObjects(t, "helm template", []byte(out)))

	for _, key := range []string{"v1 ServiceAccount " + ns + "/nodeready", "v1 ConfigMap " + ns + "/nodeready-config", "apps/v1 DaemonSet " + ns + "/nodeready"} {
		assert.Contains(t, objects, key)
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: "nodeready", Namespace: ns}
	bindings := 0
	for key, o := range objects {
		switch o["kind"] {
		case "ClusterRoleBinding", "RoleBinding":
			b := decode[rbacv1.RoleBinding](t, objects, key)
			assert.Equal(t, []rbacv1.Subject{subject}, b.Subjects, key)
			bindings++
		}
	}
	assert.Equal(t, 5, bindings, "ClusterRoleBindings nodeready, nodeready-replace-node; RoleBindings endpoints, cluster-dns, events")
	for _, key := range []string{
		"rbac.authorization.k8s.io/v1 Role backends/nodeready-endpoints", "rbac.authorization.k8s.io/v1 RoleBinding backends/nodeready-endpoints",
		"rbac.authorization.k8s.io/v1 Role dns/nodeready-cluster-dns", "rbac.authorization.k8s.io/v1 RoleBinding dns/nodeready-cluster-dns",
	} {
		assert.Contains(t, objects, key)
	}

	// The policies guard whoever holds the agent's ClusterRole, which the binding above gives
	// the ServiceAccount in the release's namespace: no policy names a ServiceAccount itself.
	role := decode[rbacv1.ClusterRole](t, objects, "rbac.authorization.k8s.io/v1 ClusterRole /nodeready")
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"node-ready.io"}, Resources: []string{"agents"}, Verbs: []string{"verify"}})
	for _, name := range []string{"nodeready-own-node", "nodeready-own-nodeclaim", "nodeready-own-events"} {
		vap := decode[admissionv1.ValidatingAdmissionPolicy](t, objects, "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy /"+name)
		assert.Nil(t, vap.Spec.ParamKind, name)
		b := decode[admissionv1.ValidatingAdmissionPolicyBinding](t, objects, "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding /"+name)
		assert.Nil(t, b.Spec.ParamRef, name)
	}
}

// TestNoClusterDNSService: an empty clusterDNSService turns the bootstrap exception off, and
// with it the Role it needed.
func TestNoClusterDNSService(t *testing.T) {
	objects := render(t, "--set", "config.clusterDNSService=")
	assert.NotContains(t, objects, "rbac.authorization.k8s.io/v1 Role kube-system/nodeready-cluster-dns")
	assert.NotContains(t, objects, "rbac.authorization.k8s.io/v1 RoleBinding kube-system/nodeready-cluster-dns")
	cm := decode[corev1.ConfigMap](t, objects, "v1 ConfigMap kube-system/nodeready-config")
	assert.Equal(t, "", cm.Data["CLUSTER_DNS_SERVICE"])
}

// TestMetricsPortFollowsValues: the container port the PodMonitor scrapes by name is
// config.metricsPort.
func TestMetricsPortFollowsValues(t *testing.T) {
	objects := render(t, "--set", "config.metricsPort=9464")
	ds := decode[appsv1.DaemonSet](t, objects, "apps/v1 DaemonSet kube-system/nodeready")
	require.Len(t, ds.Spec.Template.Spec.Containers, 1)
	assert.Equal(t, []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9464, Protocol: corev1.ProtocolTCP}}, ds.Spec.Template.Spec.Containers[0].Ports)
	cm := decode[corev1.ConfigMap](t, objects, "v1 ConfigMap kube-system/nodeready-config")
	assert.Equal(t, "9464", cm.Data["METRICS_PORT"])
}

func metav1LabelSelectorRequirement(key string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpDoesNotExist}
}

// TestPodNetworkServiceRole: the podnetwork check reads the EndpointSlices of
// config.podNetworkService, so its namespace gets a Role for that; without it, the check
// reads the cluster DNS Service's, whose Role is there already.
func TestPodNetworkServiceRole(t *testing.T) {
	objects := render(t, "--set", "config.podNetworkService=apps/web", "--set", "config.checks={dns,podnetwork}")
	for _, key := range []string{"rbac.authorization.k8s.io/v1 Role apps/nodeready-pod-network", "rbac.authorization.k8s.io/v1 RoleBinding apps/nodeready-pod-network"} {
		assert.Contains(t, objects, key)
	}
	role := decode[rbacv1.Role](t, objects, "rbac.authorization.k8s.io/v1 Role apps/nodeready-pod-network")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list"}}}, role.Rules)
	cm := decode[corev1.ConfigMap](t, objects, "v1 ConfigMap kube-system/nodeready-config")
	assert.Equal(t, "apps/web", cm.Data["POD_NETWORK_SERVICE"])
	assert.Equal(t, "dns,podnetwork", cm.Data["CHECKS"])

	for key := range render(t) {
		assert.NotContains(t, key, "nodeready-pod-network")
	}
}
