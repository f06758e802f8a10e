package chart_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/framework/chart"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// checksumAnnotation is the pod template annotation that carries the checksum of the
// configuration, so that a change rolls the agents.
const checksumAnnotation = "checksum/config"

const dsKey = "apps/v1 DaemonSet kube-system/nodeready"

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// hook is the Helm hook an object is, or "".
func hook(o chart.Object) string {
	meta, _ := o["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	h, _ := ann["helm.sh/hook"].(string)
	return h
}

// chartOwned leaves out what the chart adds to the objects of manifests/: its hooks (helm
// test, the uninstall hook: TestHelmTestPod, TestUninstallHookIsManifests) and the DaemonSet's
// configuration checksum, which must be there (TestConfigChecksum says what it follows).
func chartOwned(t *testing.T, objects map[string]chart.Object) map[string]chart.Object {
	t.Helper()
	for k, o := range objects {
		if hook(o) != "" {
			delete(objects, k)
		}
	}
	if ds, ok := objects[dsKey]; ok {
		meta := ds["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		assert.Regexp(t, sha256Hex, ann[checksumAnnotation], "the pod template's %s", checksumAnnotation)
		delete(ann, checksumAnnotation)
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
	return objects
}

// renderAll renders with the flags and returns every object, hooks included, unchanged.
func renderAll(t *testing.T, flags ...string) map[string]chart.Object {
	t.Helper()
	out, err := template(t, flags...)
	require.NoError(t, err)
	return chart.ParseObjects(t, "helm template", []byte(out))
}

func daemonSet(t *testing.T, objects map[string]chart.Object) *appsv1.DaemonSet {
	t.Helper()
	return decode[appsv1.DaemonSet](t, objects, dsKey)
}

// TestImageDigest: image.digest pins every container the chart runs (the agent, the helm
// test, the uninstall hook) to repository@digest, whatever image.tag says.
func TestImageDigest(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objects := renderAll(t, "--set", "image.repository=registry.example.com/nodeready",
		"--set", "image.tag=ignored", "--set", "image.digest="+digest)
	want := "registry.example.com/nodeready@" + digest
	ds := daemonSet(t, objects)
	assert.Equal(t, want, ds.Spec.Template.Spec.Containers[0].Image)
	pod := decode[corev1.Pod](t, objects, "v1 Pod kube-system/nodeready-test")
	assert.Equal(t, want, pod.Spec.Containers[0].Image)
	job := decode[batchv1.Job](t, objects, "batch/v1 Job kube-system/nodeready-uninstall")
	assert.Equal(t, want, job.Spec.Template.Spec.Containers[0].Image)

	// Without a digest, the tag (else appVersion), as before.
	ds = daemonSet(t, renderAll(t, "--set", "image.tag=v9.9.9"))
	assert.Equal(t, "ghcr.io/nodeready/nodeready:v9.9.9", ds.Spec.Template.Spec.Containers[0].Image)
}

// TestPodValues: pod labels and annotations, tolerations, nodeSelector and extra environment
// variables reach the agent pods beside what the chart gives them, and podMonitor.labels the
// PodMonitor.
func TestPodValues(t *testing.T) {
	objects := render(t,
		"--set", "podLabels.team=infra", "--set", "podAnnotations.example\\.com/owner=infra",
		"--set-json", `tolerations=[{"key":"dedicated","operator":"Equal","value":"ci","effect":"NoSchedule"}]`,
		"--set", "nodeSelector.example\\.com/pool=workers",
		"--set-json", `extraEnv=[{"name":"HTTPS_PROXY","value":"http://proxy.example.com:3128"},{"name":"GODEBUG","valueFrom":{"configMapKeyRef":{"name":"site","key":"godebug"}}}]`,
		"--set", "podMonitor.enabled=true", "--set", "podMonitor.labels.release=kube-prometheus-stack")
	ds := daemonSet(t, objects)
	tmpl := ds.Spec.Template
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": "nodeready", "team": "infra"}, tmpl.Labels)
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": "nodeready"}, ds.Spec.Selector.MatchLabels, "the selector stays")
	assert.Equal(t, map[string]string{"example.com/owner": "infra"}, tmpl.Annotations)
	assert.Equal(t, append(ownTolerations(wellknown.TaintKey),
		corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ci", Effect: corev1.TaintEffectNoSchedule},
	), tmpl.Spec.Tolerations, "the agent's own tolerations stay first")
	assert.Equal(t, map[string]string{"example.com/pool": "workers"}, tmpl.Spec.NodeSelector)

	env := tmpl.Spec.Containers[0].Env
	names := make([]string, len(env))
	for i, e := range env {
		names[i] = e.Name
	}
	assert.Equal(t, []string{"NODE_NAME", "POD_NAME", "POD_NAMESPACE", "STATE_DIR", "GOMEMLIMIT", "KUBE_ROOT_CA_CRT", "HTTPS_PROXY", "GODEBUG"}, names)
	assert.Equal(t, "http://proxy.example.com:3128", env[6].Value)
	require.NotNil(t, env[7].ValueFrom)
	assert.Equal(t, "godebug", env[7].ValueFrom.ConfigMapKeyRef.Key)

	pm := objects["monitoring.coreos.com/v1 PodMonitor kube-system/nodeready"]
	require.NotNil(t, pm)
	assert.Equal(t, map[string]any{"app.kubernetes.io/name": "nodeready", "release": "kube-prometheus-stack"}, pm["metadata"].(map[string]any)["labels"])
}

// requiredExpressions are the DaemonSet's own node expressions, which every required term of
// the merged affinity holds.
func requiredExpressions(label string) []corev1.NodeSelectorRequirement {
	return []corev1.NodeSelectorRequirement{
		{Key: label, Operator: corev1.NodeSelectorOpDoesNotExist},
		{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: "type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"virtual-kubelet"}},
		{Key: "eks.amazonaws.com/compute-type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"fargate"}},
	}
}

// TestAffinityMerged: the user's affinity narrows the agent's nodes and never widens them:
// each of its required terms (ORed) also holds the DaemonSet's own expressions, so no term
// lets an agent run on a verified node; preferred terms and pod affinities pass as given.
func TestAffinityMerged(t *testing.T) {
	objects := render(t, "--set", "config.verifiedLabel=example.com/ready", "--set-json", `affinity={
		"nodeAffinity": {
			"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
				{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
				{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-x"]}]}
			]},
			"preferredDuringSchedulingIgnoredDuringExecution": [
				{"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}}
			]
		},
		"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
			{"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}}
		]}
	}`)
	aff := daemonSet(t, objects).Spec.Template.Spec.Affinity
	own := requiredExpressions("example.com/ready")
	assert.Equal(t, []corev1.NodeSelectorTerm{
		{MatchExpressions: append(slices.Clone(own), corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}})},
		{MatchExpressions: own, MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-x"}}}},
	}, aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	require.Len(t, aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
	assert.Equal(t, "zone", aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Preference.MatchExpressions[0].Key)
	require.NotNil(t, aff.PodAntiAffinity)
	assert.Len(t, aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)

	// Preferred node affinity alone: the one required term is the agent's own.
	aff = daemonSet(t, render(t, "--set-json", `affinity={"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":5,"preference":{"matchExpressions":[{"key":"zone","operator":"In","values":["z1"]}]}}]}}`)).Spec.Template.Spec.Affinity
	assert.Equal(t, []corev1.NodeSelectorTerm{{MatchExpressions: requiredExpressions("node-ready/verified")}},
		aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
}

// TestStartupTaintPolicyFollowsNodeSelector: with a nodeSelector, the creation-time policy
// taints only nodes created with its labels, the nodes that get an agent.
func TestStartupTaintPolicyFollowsNodeSelector(t *testing.T) {
	objects := render(t, "--set", "startupTaintPolicy.enabled=true", "--set", "nodeSelector.example\\.com/pool=workers")
	b := decode[admissionv1.MutatingAdmissionPolicyBinding](t, objects, "admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding /nodeready-startup-taint")
	assert.Equal(t, map[string]string{"example.com/pool": "workers"}, b.Spec.MatchResources.ObjectSelector.MatchLabels)
	assert.Contains(t, b.Spec.MatchResources.ObjectSelector.MatchExpressions, metav1LabelSelectorRequirement("node-ready/verified"), "the chart's own exceptions stay")
}

// configChecksum is the DaemonSet's checksum annotation, rendered with the flags.
func configChecksum(t *testing.T, flags ...string) string {
	t.Helper()
	ds := daemonSet(t, renderAll(t, flags...))
	sum := ds.Spec.Template.Annotations[checksumAnnotation]
	require.Regexp(t, sha256Hex, sum)
	return sum
}

// TestConfigChecksum: the pod template's checksum follows the ConfigMap's data and nothing
// else, so a change of any setting rolls the agents of held nodes onto it (they read the
// configuration once, at start) and other changes do not roll them for it.
func TestConfigChecksum(t *testing.T) {
	base := configChecksum(t)
	assert.Equal(t, base, configChecksum(t), "the same values give the same checksum")
	// podMonitor.enabled sets METRICS_FINAL_SCRAPE_TIMEOUT: scraped agents wait for a last scrape.
	for _, set := range []string{"config.logLevel=debug", "config.maxRetries=7", "config.checks={dns,tcp}", "config.settleTime=3s", "podMonitor.enabled=true"} {
		assert.NotEqual(t, base, configChecksum(t, "--set", set), set)
	}
	for _, set := range []string{"resources.limits.memory=128Mi", "podLabels.team=infra", "image.tag=v9.9.9", "alerts.enabled=true"} {
		assert.Equal(t, base, configChecksum(t, "--set", set), set)
	}
}

// TestBadPodValuesFail: a bad pod value stops helm before anything is rendered, naming the
// value: by the schema, or by the templates where a value would contradict what the chart
// owns or could leave a tainted node without an agent.
func TestBadPodValuesFail(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"--set", "image.digest=sha256:abc"}, []string{"/image/digest", "does not match pattern"}},
		{[]string{"--set", "image.digest=latest"}, []string{"/image/digest", "does not match pattern"}},
		{[]string{"--set", "podLabels.app\\.kubernetes\\.io/name=other"}, []string{"podLabels: app.kubernetes.io/name is the DaemonSet's selector"}},
		{[]string{"--set", "podLabels.team=a b"}, []string{"/podLabels/team", "does not match pattern"}},
		{[]string{"--set", "podAnnotations.checksum/config=x"}, []string{"podAnnotations: checksum/config is the chart's"}},
		{[]string{"--set-json", `tolerations=[{"operator":"Sometimes"}]`}, []string{"/tolerations/0/operator", "value must be one of"}},
		{[]string{"--set-json", `tolerations=[{"key":"a","tolerateSeconds":5}]`}, []string{"/tolerations/0", "'tolerateSeconds' not allowed"}},
		{[]string{"--set", "tolerateAll=yes"}, []string{"/tolerateAll", "want boolean"}},
		{[]string{"--set", "alerts.enabled=true", "--set", "alerts.heldWithoutAgentFor=5min"}, []string{"/alerts/heldWithoutAgentFor", "does not match pattern"}},
		{[]string{"--set-string", "alerts.heldWithoutAgentFor=300"}, []string{"/alerts/heldWithoutAgentFor", "does not match pattern"}},
		{[]string{"--set-string", "nodeSelector.node-ready/verified=true"}, []string{"nodeSelector: node-ready/verified is config.verifiedLabel"}},
		{[]string{"--set", "nodeSelector.kubernetes\\.io/os=windows"}, []string{"nodeSelector: kubernetes.io/os: nodeready serves Linux nodes only"}},
		{[]string{"--set", "startupTaintPolicy.enabled=true", "--set-json", `affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"Exists"}]}]}}}`},
			[]string{"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: with startupTaintPolicy.enabled"}},
		{[]string{"--set-json", `affinity={"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"kubernetes.io/hostname"}]}}`},
			[]string{"affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution: a required pod (anti-)affinity"}},
		{[]string{"--set-json", `affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"Maybe"}]}]}}}`},
			[]string{"/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0/operator", "value must be one of"}},
		{[]string{"--set-json", `affinity={"nodeAfinity":{}}`}, []string{"/affinity", "'nodeAfinity' not allowed"}},
		{[]string{"--set-json", `extraEnv=[{"name":"TAINT_KEY","value":"x"}]`}, []string{"extraEnv[0].name: TAINT_KEY is set by the chart"}},
		{[]string{"--set-json", `extraEnv=[{"name":"A","value":"1"},{"name":"NODE_NAME","value":"x"}]`}, []string{"extraEnv[1].name: NODE_NAME is set by the chart"}},
		{[]string{"--set-json", `extraEnv=[{"name":"1A","value":"x"}]`}, []string{"/extraEnv/0/name", "does not match pattern"}},
		{[]string{"--set-json", `extraEnv=[{"value":"x"}]`}, []string{"/extraEnv/0", "missing property 'name'"}},
		{[]string{"--set-json", `extraEnv=[{"name":"A","value":"x","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}]`}, []string{"/extraEnv/0", "'not' failed"}},
		{[]string{"--set", "podMonitor.labels.helm\\.sh/chart=x"}, []string{"podMonitor.labels: helm.sh/chart is one of the labels the chart gives every object"}},
		{[]string{"--set-json", `extraVolumes=[{"name":"state","emptyDir":{}}]`}, []string{"extraVolumes[0].name: state is a volume of the chart's own"}},
		{[]string{"--set-json", `extraVolumes=[{"name":"ca","configMap":{"name":"a"},"secret":{"secretName":"b"}}]`}, []string{"/extraVolumes/0", "maxProperties"}},
		{[]string{"--set-json", `extraVolumes=[{"name":"ca"}]`}, []string{"/extraVolumes/0", "minProperties"}},
		{[]string{"--set-json", `extraVolumeMounts=[{"name":"ca","mountPath":"/etc/ca"}]`}, []string{"extraVolumeMounts[0].name: ca is none of extraVolumes"}},
		{[]string{"--set-json", `extraVolumes=[{"name":"ca","emptyDir":{}}]`, "--set-json", `extraVolumeMounts=[{"name":"ca","mountPath":"/run/nodeready/x"}]`},
			[]string{"extraVolumeMounts[0].mountPath: /run/nodeready/x is where the chart mounts"}},
		{[]string{"--set-json", `extraVolumeMounts=[{"name":"ca","mountPath":"etc/ca"}]`}, []string{"/extraVolumeMounts/0/mountPath", "does not match pattern"}},
		{[]string{"--set-json", `initContainers=[{"name":"prepull"}]`}, []string{"/initContainers/0", "missing property 'image'"}},
		{[]string{"--set-json", `initContainers=[{"name":"nodeready","image":"busybox"}]`}, []string{"initContainers[0].name: nodeready is the agent container's name"}},
		{[]string{"--set", "uninstall.waitForAgents=soon"}, []string{"/uninstall/waitForAgents", "does not match pattern"}},
		{[]string{"--set", "uninstall.timeoutSeconds=5"}, []string{"/uninstall/timeoutSeconds", "minimum: got 5, want 30"}},
		{[]string{"--set", "uninstall.releaseHeldNodes=maybe"}, []string{"/uninstall/releaseHeldNodes", "got string, want boolean"}},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			out, err := template(t, tc.flags...)
			require.Error(t, err, "rendered:\n%s", out)
			assert.Empty(t, out)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestHelmTestPod: `helm test` runs the agent's network checks once, with --dry-run, as the
// agent: its ServiceAccount, image, ConfigMap and security context, on a released node. The
// pod is no agent pod: the DaemonSet's selector does not match it, so the DaemonSet never
// adopts it.
func TestHelmTestPod(t *testing.T) {
	objects := renderAll(t, "--set", "config.checks={dns,endpoints,daemonsets,conditions}")
	pod := decode[corev1.Pod](t, objects, "v1 Pod kube-system/nodeready-test")
	assert.Equal(t, "test", pod.Annotations["helm.sh/hook"])
	assert.NotEqual(t, "nodeready", pod.Labels["app.kubernetes.io/name"], "the DaemonSet would adopt the pod")
	assert.Equal(t, "nodeready", pod.Spec.ServiceAccountName)
	assert.Equal(t, corev1.RestartPolicyNever, pod.Spec.RestartPolicy)
	assert.Empty(t, pod.Spec.Tolerations, "the test runs on a released node, not a held one")
	c := pod.Spec.Containers[0]
	assert.Equal(t, []string{"--dry-run"}, c.Args)
	assert.Equal(t, "nodeready-config", c.EnvFrom[0].ConfigMapRef.Name)
	assert.Equal(t, corev1.EnvVar{Name: "CHECKS", Value: "dns,endpoints"}, c.Env[0], "the network checks only: a gate would judge the test pod's node")
	ds := daemonSet(t, objects)
	assert.Equal(t, ds.Spec.Template.Spec.SecurityContext, pod.Spec.SecurityContext)
	assert.Equal(t, ds.Spec.Template.Spec.Containers[0].SecurityContext, c.SecurityContext)

	pod = decode[corev1.Pod](t, renderAll(t, "--set", "config.checks={conditions}"), "v1 Pod kube-system/nodeready-test")
	assert.Equal(t, corev1.EnvVar{Name: "CHECKS", Value: "apiserver"}, pod.Spec.Containers[0].Env[0], "never empty, which would mean the default checks")
}

// stripHelm removes what the chart adds to an object of manifests/uninstall/: the hook
// annotations and Helm's labels.
func stripHelm(o chart.Object) {
	meta := o["metadata"].(map[string]any)
	delete(meta, "annotations")
	labels, _ := meta["labels"].(map[string]any)
	for _, k := range []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
		delete(labels, k)
	}
}

// TestUninstallHookIsManifests: helm uninstall's pre-delete hook is manifests/uninstall/ (the
// objects `kubectl apply -f manifests/uninstall/` makes), RBAC before the Job, each deleted
// once the Job succeeded; in another namespace it follows the release, and the values set the
// Job's deadline, wait and --remove-marks.
func TestUninstallHookIsManifests(t *testing.T) {
	hooks := map[string]chart.Object{}
	for k, o := range renderAll(t) {
		if hook(o) == "pre-delete" {
			ann := o["metadata"].(map[string]any)["annotations"].(map[string]any)
			assert.Equal(t, "before-hook-creation,hook-succeeded", ann["helm.sh/hook-delete-policy"], k)
			// Argo CD, which renders the chart with helm template, runs the same objects
			// before it deletes the Application, in the same order.
			assert.Equal(t, "PreDelete", ann["argocd.argoproj.io/hook"], k)
			assert.Equal(t, "BeforeHookCreation,HookSucceeded", ann["argocd.argoproj.io/hook-delete-policy"], k)
			assert.Equal(t, ann["helm.sh/hook-weight"], ann["argocd.argoproj.io/sync-wave"], k)
			if o["kind"] == "Job" {
				assert.Equal(t, "0", ann["helm.sh/hook-weight"], k)
			} else {
				assert.Equal(t, "-10", ann["helm.sh/hook-weight"], "%s comes before the Job", k)
			}
			stripHelm(o)
			hooks[k] = o
		}
	}
	assertSameObjects(t, chart.ManifestObjects(t, "uninstall/*.yaml"), hooks)

	// The uninstaller's ServiceAccount is no parameter of the own-node policies, whose
	// bindings select ServiceAccounts by this label: they would hold it to one node.
	for k, o := range hooks {
		labels := o["metadata"].(map[string]any)["labels"].(map[string]any)
		assert.NotEqual(t, "nodeready", labels["app.kubernetes.io/name"], k)
	}

	out, err := chart.RunHelm(t, "template", chart.Release, chart.Dir(t), "--namespace", "nodeready-system",
		"--set", "uninstall.removeNodeMarks=true", "--set", "uninstall.waitForAgents=2m", "--set", "uninstall.timeoutSeconds=600")
	require.NoError(t, err)
	objects := chart.ParseObjects(t, "helm template", []byte(out))
	job := decode[batchv1.Job](t, objects, "batch/v1 Job nodeready-system/nodeready-uninstall")
	assert.Equal(t, []string{"uninstall", "--release-held", "--daemonset=nodeready-system/nodeready",
		"--creation-policy-binding=nodeready-startup-taint", "--wait-for-agents=2m", "--remove-marks"}, job.Spec.Template.Spec.Containers[0].Args)
	assert.EqualValues(t, 600, *job.Spec.ActiveDeadlineSeconds)

	// The Job prefers a verified node: a held one may have no working network.
	job = decode[batchv1.Job](t, renderAll(t, "--set", "config.verifiedLabel=example.com/ready", "--set", "config.verifiedLabelValue=yes"),
		"batch/v1 Job kube-system/nodeready-uninstall")
	require.NotNil(t, job.Spec.Template.Spec.Affinity)
	assert.Equal(t, []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "example.com/ready", Operator: corev1.NodeSelectorOpIn, Values: []string{"yes"}}}}}},
		job.Spec.Template.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	assert.Contains(t, objects, "rbac.authorization.k8s.io/v1 Role nodeready-system/nodeready-uninstall")

	for k, o := range renderAll(t, "--set", "uninstall.releaseHeldNodes=false") {
		assert.NotEqual(t, "pre-delete", hook(o), "%s with uninstall.releaseHeldNodes=false", k)
	}
}

// leafValues lists the dotted paths of values.yaml's values: maps are walked, except the
// free-form ones (resources, and labels and annotations with defaults), whose path is one
// value.
func leafValues(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	last := prefix[strings.LastIndex(prefix, ".")+1:]
	if !ok || len(m) == 0 || prefix == "resources" || last == "labels" || last == "annotations" {
		*out = append(*out, prefix)
		return
	}
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		leafValues(p, sub, out)
	}
}

// TestChartREADMEListsEveryValue: the chart's README has a row for every value of
// values.yaml, and none for a value that does not exist.
func TestChartREADMEListsEveryValue(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chart.Dir(t), "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(data, &values))
	var want []string
	leafValues("", values, &want)

	readme, err := os.ReadFile(filepath.Join(chart.Dir(t), "README.md"))
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z0-9_.]+)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		documented = append(documented, m[1])
	}
	assert.ElementsMatch(t, want, documented, "every value once")
}

// TestExtraVolumesAndInitContainers: extraVolumes, extraVolumeMounts and initContainers reach
// the agent pod after what the chart gives it (a CA file for the http check, a command gate's
// program, a pre-pull), and the helm test pod gets the same files.
func TestExtraVolumesAndInitContainers(t *testing.T) {
	objects := renderAll(t,
		"--set-json", `extraVolumes=[{"name":"site-ca","configMap":{"name":"site-ca"}}]`,
		"--set-json", `extraVolumeMounts=[{"name":"site-ca","mountPath":"/etc/site-ca","readOnly":true}]`,
		"--set-json", `initContainers=[{"name":"prepull","image":"registry.example.com/app:v1","command":["true"]}]`)
	spec := daemonSet(t, objects).Spec.Template.Spec
	require.Len(t, spec.InitContainers, 1)
	assert.Equal(t, corev1.Container{Name: "prepull", Image: "registry.example.com/app:v1", Command: []string{"true"}}, spec.InitContainers[0])
	var volumes []string
	for _, v := range spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	assert.Equal(t, []string{"state", "api-token", "site-ca"}, volumes)
	assert.Equal(t, "site-ca", spec.Volumes[2].ConfigMap.Name)
	mount := corev1.VolumeMount{Name: "site-ca", MountPath: "/etc/site-ca", ReadOnly: true}
	mounts := spec.Containers[0].VolumeMounts
	require.Len(t, mounts, 3)
	assert.Equal(t, mount, mounts[2], "after the chart's own mounts")

	pod := decode[corev1.Pod](t, objects, "v1 Pod kube-system/nodeready-test")
	assert.Equal(t, []corev1.VolumeMount{mount}, pod.Spec.Containers[0].VolumeMounts)
	require.Len(t, pod.Spec.Volumes, 1)
	assert.Equal(t, "site-ca", pod.Spec.Volumes[0].Name)
}

// TestNotesWarnAboutGates: the notes after helm install name each gate of config.checks whose
// permissions its switch does not install.
func TestNotesWarnAboutGates(t *testing.T) {
	for _, tc := range []struct{ check, setting, gate string }{
		{"daemonsets", "", "gates.daemonSets.enabled"},
		{"csi", "config.csiDrivers={ebs.csi.aws.com}", "gates.csi.enabled"},
		{"dra", "config.draDevices={gpu.nvidia.com>=1}", "gates.dra.enabled"},
	} {
		t.Run(tc.check, func(t *testing.T) {
			args := []string{"install", chart.Release, chart.Dir(t), "--namespace", "kube-system", "--dry-run=client", "--set", "config.checks={" + tc.check + "}"}
			if tc.setting != "" {
				args = append(args, "--set", tc.setting)
			}
			out, err := chart.RunHelm(t, args...)
			require.NoError(t, err, out)
			assert.Contains(t, out, "config.checks names "+tc.check+" but "+tc.gate+" is false")
			out, err = chart.RunHelm(t, append(args, "--set", tc.gate+"=true")...)
			require.NoError(t, err, out)
			assert.NotContains(t, out, "config.checks names "+tc.check)
		})
	}
}

// TestArtifactHubImages: the image Artifact Hub lists for the chart is the one it installs by
// default, the image repository at the chart's appVersion.
func TestArtifactHubImages(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chart.Dir(t), "Chart.yaml"))
	require.NoError(t, err)
	var meta struct {
		AppVersion  string            `json:"appVersion"`
		Annotations map[string]string `json:"annotations"`
	}
	require.NoError(t, yaml.Unmarshal(data, &meta))
	var images []struct{ Name, Image string }
	require.NoError(t, yaml.Unmarshal([]byte(meta.Annotations["artifacthub.io/images"]), &images))
	image := daemonSet(t, renderAll(t)).Spec.Template.Spec.Containers[0].Image
	require.Len(t, images, 1)
	assert.Equal(t, image, images[0].Image)
	assert.True(t, strings.HasSuffix(image, ":"+meta.AppVersion), image)
}

// ownTolerations are the agent's own tolerations: the startup taints' keys, then every
// NoExecute taint; not node.kubernetes.io/not-ready:NoSchedule, so that the pod is created
// once its node is Ready.
func ownTolerations(keys ...string) []corev1.Toleration {
	var ts []corev1.Toleration
	for _, k := range keys {
		ts = append(ts, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists})
	}
	return append(ts, corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
}

// TestTolerations: the agent pods tolerate config.taintKey's taint, each of
// config.extraTaints, the taints of labelToTaintPolicy.rules when the policy is on, and every
// NoExecute taint, then the values' tolerations; not a joining node's not-ready taint nor a
// pool's NoSchedule taint. tolerateAll tolerates every taint.
// NodeReadyHeldWithoutAgent waits alerts.heldWithoutAgentFor and selects the agent pods by
// the release's namespace and DaemonSet.
func TestTolerations(t *testing.T) {
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tolerated := func(ts []corev1.Toleration, taint corev1.Taint) bool {
		return slices.ContainsFunc(ts, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), &taint, false) })
	}

	ts := daemonSet(t, render(t)).Spec.Template.Spec.Tolerations
	assert.Equal(t, ownTolerations(wellknown.TaintKey), ts)
	assert.False(t, tolerated(ts, notReady), "a joining node's not-ready taint")
	assert.False(t, tolerated(ts, gpu), "a pool's NoSchedule taint")
	assert.True(t, tolerated(ts, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}))

	ts = daemonSet(t, render(t, "--set", "config.taintKey=example.com/unready",
		"--set-json", `config.extraTaints=["readiness.k8s.io/nodeready-unverified=true:NoSchedule","startup-taint.cluster-autoscaler.kubernetes.io/nodeready:NoSchedule"]`,
		"--set-json", `tolerations=[{"key":"dedicated","operator":"Exists","effect":"NoSchedule"}]`)).Spec.Template.Spec.Tolerations
	assert.Equal(t, append(ownTolerations("example.com/unready", "readiness.k8s.io/nodeready-unverified", "startup-taint.cluster-autoscaler.kubernetes.io/nodeready"),
		corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}), ts)
	assert.True(t, tolerated(ts, gpu), "the pool's taint, listed")
	assert.False(t, tolerated(ts, notReady))

	// The taints the chart's own label-to-taint rules give: the agent must reach those nodes.
	ci := corev1.Taint{Key: "dedicated", Value: "ci", Effect: corev1.TaintEffectNoSchedule}
	rules := `labelToTaintPolicy.rules=[{"label":"dedicated","value":"ci","taint":{"key":"dedicated","value":"ci","effect":"NoSchedule"}}]`
	ts = daemonSet(t, render(t, "--set", "labelToTaintPolicy.enabled=true", "--set-json", rules)).Spec.Template.Spec.Tolerations
	assert.Equal(t, append(ownTolerations(wellknown.TaintKey)[:1],
		corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ci", Effect: corev1.TaintEffectNoSchedule},
		ownTolerations(wellknown.TaintKey)[1]), ts)
	assert.True(t, tolerated(ts, ci), "the label-to-taint rule's taint")
	assert.False(t, tolerated(ts, gpu), "another value's taint")
	ts = daemonSet(t, render(t, "--set-json", rules)).Spec.Template.Spec.Tolerations
	assert.False(t, tolerated(ts, ci), "rules without the policy give no taint")

	ts = daemonSet(t, render(t, "--set", "tolerateAll=true")).Spec.Template.Spec.Tolerations
	assert.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, ts)
	assert.True(t, tolerated(ts, notReady) && tolerated(ts, gpu), "every taint")

	objects := render(t, "--namespace", "nodeready", "--set", "alerts.enabled=true", "--set", "alerts.heldWithoutAgentFor=90s")
	rule, err := yaml.Marshal(objects["monitoring.coreos.com/v1 PrometheusRule nodeready/nodeready"])
	require.NoError(t, err)
	assert.Contains(t, string(rule), `kube_pod_info{namespace="nodeready", created_by_kind="DaemonSet", created_by_name="nodeready"}`)
	assert.Contains(t, string(rule), "for: 90s")
}
