package checks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

var startupTaint = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// dsOptions are the options of a discovering check with the default
// verified label.
func dsOptions() checks.DaemonSetsWant {
	return checks.DaemonSetsWant{VerifiedLabel: "node-ready/verified", VerifiedLabelValue: "true"}
}

// newNode is node-a with the startup taint, labelled as a kubelet does, plus
// the given taints.
func newNode(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{
			"kubernetes.io/hostname":      "node-a",
			"topology.kubernetes.io/zone": "zone-a",
			"pool":                        "gpu",
		}},
		Spec: corev1.NodeSpec{Taints: append([]corev1.Taint{startupTaint}, taints...)},
	}
}

// daemonSet is kube-system/name that tolerates every taint, like most node
// agents, changed by edit.
func daemonSet(name string, edit func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID("uid-" + name)},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		}}},
	}
	if edit != nil {
		edit(ds)
	}
	return ds
}

// daemonPod is a pod of ds on nodeName in phase, Ready or not.
func daemonPod(ds *appsv1.DaemonSet, name, nodeName string, phase corev1.PodPhase, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ds.Namespace, Name: name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: new(true),
			}},
		},
		Spec: corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{
			Phase:      phase,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}

func affinity(terms ...corev1.NodeSelectorTerm) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func tolerations(ts ...corev1.Toleration) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = ts }
}

// TestDaemonSetsDiscovery runs the check on a node without pods: a
// DaemonSet the discovery requires shows up as "no pod", one it does not
// require leaves the check passing.
func TestDaemonSetsDiscovery(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	tolerateStartup := corev1.Toleration{Key: startupTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name     string
		ds       *appsv1.DaemonSet
		taints   []corev1.Taint
		required bool
	}{
		{name: "no constraints, tolerates everything", ds: daemonSet("x", nil), required: true},
		{name: "nodeSelector matches", ds: daemonSet("x", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
		}), required: true},
		{name: "nodeSelector does not match", ds: daemonSet("x", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "cpu"}
		})},
		{name: "affinity In matches", ds: daemonSet("x", affinity(expr("pool", corev1.NodeSelectorOpIn, "cpu", "gpu"))), required: true},
		{name: "affinity In does not match", ds: daemonSet("x", affinity(expr("pool", corev1.NodeSelectorOpIn, "cpu")))},
		{name: "affinity NotIn matches", ds: daemonSet("x", affinity(expr("pool", corev1.NodeSelectorOpNotIn, "cpu"))), required: true},
		{name: "affinity NotIn does not match", ds: daemonSet("x", affinity(expr("pool", corev1.NodeSelectorOpNotIn, "gpu")))},
		{name: "affinity Exists matches", ds: daemonSet("x", affinity(expr("pool", corev1.NodeSelectorOpExists))), required: true},
		{name: "affinity Exists does not match", ds: daemonSet("x", affinity(expr("storage", corev1.NodeSelectorOpExists)))},
		{name: "affinity DoesNotExist matches", ds: daemonSet("x", affinity(expr("storage", corev1.NodeSelectorOpDoesNotExist))), required: true},
		{name: "affinity DoesNotExist does not match", ds: daemonSet("x", affinity(expr("pool", corev1.NodeSelectorOpDoesNotExist)))},
		{name: "affinity terms are ORed", ds: daemonSet("x", affinity(
			expr("pool", corev1.NodeSelectorOpIn, "cpu"),
			expr("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "zone-a"),
		)), required: true},
		{name: "matchFields metadata.name matches", ds: daemonSet("x", affinity(corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}}},
		})), required: true},
		{name: "matchFields metadata.name does not match", ds: daemonSet("x", affinity(corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-b"}}},
		}))},
		{name: "template names another node", ds: daemonSet("x", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.NodeName = "node-b"
		})},
		{name: "foreign taint not tolerated", taints: []corev1.Taint{gpuTaint}, ds: daemonSet("x", tolerations(tolerateStartup))},
		{name: "foreign taint tolerated", taints: []corev1.Taint{gpuTaint}, ds: daemonSet("x", tolerations(tolerateStartup,
			corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule},
		)), required: true},
		{name: "foreign taint tolerated for another value", taints: []corev1.Taint{gpuTaint}, ds: daemonSet("x", tolerations(tolerateStartup,
			corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "absent"},
		))},
		{name: "PreferNoSchedule taint is ignored", taints: []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}},
			ds: daemonSet("x", tolerations(tolerateStartup)), required: true},
		{name: "not-ready NoExecute is tolerated by every DaemonSet pod",
			taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}},
			ds:     daemonSet("x", tolerations(tolerateStartup)), required: true},
		{name: "network-unavailable is tolerated with hostNetwork",
			taints: []corev1.Taint{{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}},
			ds: daemonSet("x", func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.HostNetwork = true
				ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{tolerateStartup}
			}), required: true},
		{name: "network-unavailable is not tolerated without hostNetwork",
			taints: []corev1.Taint{{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}},
			ds:     daemonSet("x", tolerations(tolerateStartup))},
		{name: "startup taint tolerated", ds: daemonSet("x", tolerations(tolerateStartup)), required: true},
		// It gets its pod only after the release, so waiting for it would
		// hold the node forever.
		{name: "startup taint not tolerated", ds: daemonSet("x", tolerations())},
		{name: "own DaemonSet: verified DoesNotExist", ds: daemonSet("nodeready", func(ds *appsv1.DaemonSet) {
			affinity(expr("node-ready/verified", corev1.NodeSelectorOpDoesNotExist))(ds)
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{tolerateStartup}
		})},
		{name: "runs only unverified: verified NotIn true", ds: daemonSet("x", affinity(expr("node-ready/verified", corev1.NodeSelectorOpNotIn, "true")))},
		{name: "runs only once verified", ds: daemonSet("x", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"node-ready/verified": "true"}
		})},
		{name: "verified NotIn another value", ds: daemonSet("x", affinity(expr("node-ready/verified", corev1.NodeSelectorOpNotIn, "false"))), required: true},
		{name: "being deleted", ds: daemonSet("x", func(ds *appsv1.DaemonSet) {
			ds.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			ds.Finalizers = []string{"example.com/hold"}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(newNode(tt.taints...), tt.ds)
			c := checks.NewDaemonSets(adapt.Clientset(client), "node-a", dsOptions())
			requireIdentity(t, c, "daemonsets", "all")

			res := checks.Execute(t.Context(), c, runTimeout)

			if tt.required {
				require.Error(t, res.Err)
				assert.Equal(t, "daemonset kube-system/"+tt.ds.Name+": no pod on node-a", res.Err.Error())
			} else {
				assert.NoError(t, res.Err)
			}
		})
	}
}

func TestDaemonSetsReadiness(t *testing.T) {
	cilium, csi := daemonSet("cilium", nil), daemonSet("ebs-csi-node", nil)
	waiting := func(p *corev1.Pod, container, reason string) *corev1.Pod {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: container, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}
		return p
	}
	tests := []struct {
		name    string
		objects []runtime.Object
		wantErr string
	}{
		{
			name:    "every DaemonSet has a Ready pod",
			objects: []runtime.Object{cilium, csi, daemonPod(cilium, "cilium-1", "node-a", corev1.PodRunning, true), daemonPod(csi, "csi-1", "node-a", corev1.PodRunning, true)},
		},
		{
			name:    "Running is not Ready",
			objects: []runtime.Object{cilium, daemonPod(cilium, "cilium-1", "node-a", corev1.PodRunning, false)},
			wantErr: "daemonset kube-system/cilium: no Ready pod on node-a (1 pod, Running, not Ready)",
		},
		{
			name: "a pod without conditions is not Ready",
			objects: []runtime.Object{cilium, func() *corev1.Pod {
				p := daemonPod(cilium, "cilium-1", "node-a", "", false)
				p.Status = corev1.PodStatus{}
				return p
			}()},
			wantErr: "daemonset kube-system/cilium: no Ready pod on node-a (1 pod, Pending, not Ready)",
		},
		{
			name: "waiting reason and several pods",
			objects: []runtime.Object{cilium,
				waiting(daemonPod(cilium, "cilium-1", "node-a", corev1.PodRunning, false), "cilium-agent", "CrashLoopBackOff"),
				func() *corev1.Pod {
					p := daemonPod(cilium, "cilium-2", "node-a", corev1.PodPending, false)
					p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
					p.Finalizers = []string{"example.com/hold"}
					return p
				}(),
			},
			wantErr: "daemonset kube-system/cilium: no Ready pod on node-a (2 pods: Running, not Ready, cilium-agent CrashLoopBackOff; Pending, not Ready, terminating)",
		},
		{
			name:    "one Ready pod of two is enough",
			objects: []runtime.Object{cilium, daemonPod(cilium, "cilium-1", "node-a", corev1.PodRunning, false), daemonPod(cilium, "cilium-2", "node-a", corev1.PodRunning, true)},
		},
		{
			name:    "every missing DaemonSet is named, in order",
			objects: []runtime.Object{csi, cilium, daemonPod(csi, "csi-1", "node-a", corev1.PodPending, false)},
			wantErr: "daemonset kube-system/cilium: no pod on node-a; daemonset kube-system/ebs-csi-node: no Ready pod on node-a (1 pod, Pending, not Ready)",
		},
		{
			name:    "a Ready pod on another node does not count",
			objects: []runtime.Object{cilium, daemonPod(cilium, "cilium-1", "node-b", corev1.PodRunning, true)},
			wantErr: "daemonset kube-system/cilium: no pod on node-a",
		},
		{
			name:    "a Ready pod of another DaemonSet does not count",
			objects: []runtime.Object{cilium, csi, daemonPod(csi, "csi-1", "node-a", corev1.PodRunning, true)},
			wantErr: "daemonset kube-system/cilium: no pod on node-a",
		},
		{
			name:    "no DaemonSet, nothing to wait for",
			objects: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(append([]runtime.Object{newNode()}, tt.objects...)...)

			res := checks.Execute(t.Context(), checks.NewDaemonSets(adapt.Clientset(client), "node-a", dsOptions()), runTimeout)

			assertErr(t, res.Err, tt.wantErr)
			actions := client.Actions()
			require.GreaterOrEqual(t, len(actions), 2)
			assert.Equal(t, "get", actions[0].GetVerb())
			assert.Equal(t, "nodes", actions[0].GetResource().Resource)
			list, ok := actions[1].(k8stesting.ListAction)
			require.True(t, ok)
			assert.Equal(t, "daemonsets", list.GetResource().Resource)
			assert.Empty(t, list.GetNamespace(), "every namespace")
			if len(tt.objects) == 0 {
				assert.Len(t, actions, 2, "no pod list without a required DaemonSet")
				return
			}
			require.Len(t, actions, 3)
			pods, ok := actions[2].(k8stesting.ListAction)
			require.True(t, ok)
			assert.Equal(t, "pods", pods.GetResource().Resource)
			assert.Equal(t, "kube-system", pods.GetNamespace(), "the namespace of the DaemonSets only")
			assert.Equal(t, "spec.nodeName=node-a", pods.GetListRestrictions().Fields.String(), "never every pod of the cluster")
		})
	}
}

func TestDaemonSetsWaitThenPass(t *testing.T) {
	cilium := daemonSet("cilium", nil)
	pod := daemonPod(cilium, "cilium-1", "node-a", corev1.PodRunning, false)
	client := fake.NewClientset(newNode(), cilium, pod)
	c := checks.NewDaemonSets(adapt.Clientset(client), "node-a", dsOptions())

	failThenPass(t, c, "daemonset kube-system/cilium: no Ready pod on node-a (1 pod, Running, not Ready)", func() {
		pod.Status.Conditions[0].Status = corev1.ConditionTrue
		_, err := client.CoreV1().Pods("kube-system").UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
		require.NoError(t, err)
	})
}

func TestDaemonSetsNamed(t *testing.T) {
	cilium := daemonSet("cilium", nil)
	logs := daemonSet("fluent-bit", func(ds *appsv1.DaemonSet) { ds.Namespace = "logging" })
	strict := daemonSet("strict", tolerations())
	own := daemonSet("nodeready", affinity(expr("node-ready/verified", corev1.NodeSelectorOpDoesNotExist)))
	objects := []runtime.Object{newNode(), cilium, logs, strict, own,
		daemonPod(cilium, "cilium-1", "node-a", corev1.PodRunning, true),
		daemonPod(logs, "fluent-bit-1", "node-a", corev1.PodRunning, false),
	}
	tests := []struct {
		name    string
		names   []string
		wantErr string
	}{
		{name: "listed and Ready", names: []string{"kube-system/cilium"}},
		{name: "listed, other namespace, not Ready", names: []string{"kube-system/cilium", "logging/fluent-bit"},
			wantErr: "daemonset logging/fluent-bit: no Ready pod on node-a (1 pod, Running, not Ready)"},
		{name: "listed but missing", names: []string{"kube-system/calico-node", "kube-system/cilium"},
			wantErr: "daemonset kube-system/calico-node: not found"},
		{name: "listed but cannot run before the release", names: []string{"kube-system/strict"},
			wantErr: "daemonset kube-system/strict: does not run on node-a: it does not tolerate the taint node-ready/unverified=true:NoSchedule"},
		{name: "listed but runs only on unverified nodes", names: []string{"kube-system/nodeready"},
			wantErr: "daemonset kube-system/nodeready: does not run on node-a: it runs only on unverified nodes (its node selector or affinity excludes the verified label)"},
		{name: "problems in the listed order", names: []string{"logging/fluent-bit", "kube-system/calico-node"},
			wantErr: "daemonset logging/fluent-bit: no Ready pod on node-a (1 pod, Running, not Ready); daemonset kube-system/calico-node: not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(objects...)
			opts := dsOptions()
			opts.Names = tt.names
			c := checks.NewDaemonSets(adapt.Clientset(client), "node-a", opts)

			assertErr(t, checks.Execute(t.Context(), c, runTimeout).Err, tt.wantErr)
			for _, a := range client.Actions() {
				if a.GetResource().Resource == "daemonsets" {
					assert.Equal(t, "get", a.GetVerb(), "named DaemonSets are read one by one")
				}
			}
		})
	}
}

// TestDaemonSetsNamedLackingLabel: a listed DaemonSet kept off the node only by a label
// the node lacks (a GPU feature label not published, say) is the node's fault; one kept
// off by a label the node has with another value, or by anything beyond labels, is the
// configuration's.
func TestDaemonSetsNamedLackingLabel(t *testing.T) {
	const gpu = "nvidia.com/gpu.present"
	selector := func(labels map[string]string) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = labels }
	}
	for _, tt := range []struct {
		name    string
		edit    func(*appsv1.DaemonSet)
		want    string // Status
		wantErr string
	}{
		{name: "a node selector on a label the node lacks", edit: selector(map[string]string{gpu: "true", "pool": "gpu"}), want: "fail",
			wantErr: "daemonset kube-system/device-plugin: does not run on node-a: the node lacks the label " + gpu + " that its node selector or required node affinity asks for"},
		{name: "an affinity on a label the node lacks", edit: affinity(expr("pool", corev1.NodeSelectorOpIn, "cpu"), corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: gpu, Operator: corev1.NodeSelectorOpExists}, {Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu"}}},
		}), want: "fail", wantErr: "the node lacks the label " + gpu},
		{name: "a label the node has with another value", edit: selector(map[string]string{"pool": "cpu"}), want: "misconfigured",
			wantErr: "does not run on node-a: its node selector or required node affinity does not match"},
		{name: "a label lacking, and a taint not tolerated", edit: func(ds *appsv1.DaemonSet) {
			selector(map[string]string{gpu: "true"})(ds)
			tolerations()(ds)
		}, want: "misconfigured", wantErr: "does not run on node-a: its node selector or required node affinity does not match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ds := daemonSet("device-plugin", tt.edit)
			opts := dsOptions()
			opts.Names = []string{"kube-system/device-plugin"}
			c := checks.NewDaemonSets(adapt.Clientset(fake.NewClientset(newNode(), ds)), "node-a", opts)
			res := checks.Execute(t.Context(), c, runTimeout)
			assertErrContains(t, res.Err, tt.wantErr)
			assert.Equal(t, tt.want, res.Status(), "%v", res.Err)
		})
	}
}

func TestDaemonSetsSelectorAndExclusion(t *testing.T) {
	labelled := func(ds *appsv1.DaemonSet) { ds.Labels = map[string]string{"readiness": "required"} }
	cni, csi, other := daemonSet("cni", labelled), daemonSet("csi", labelled), daemonSet("logs", nil)
	objects := []runtime.Object{newNode(), cni, csi, other}
	tests := []struct {
		name       string
		selector   string
		exclude    []string
		wantTarget string
		wantErr    string
	}{
		{name: "everything", wantTarget: "all",
			wantErr: "daemonset kube-system/cni: no pod on node-a; daemonset kube-system/csi: no pod on node-a; daemonset kube-system/logs: no pod on node-a"},
		{name: "selector", selector: "readiness=required", wantTarget: "readiness=required",
			wantErr: "daemonset kube-system/cni: no pod on node-a; daemonset kube-system/csi: no pod on node-a"},
		{name: "exclusion", exclude: []string{"kube-system/logs", "kube-system/cni"}, wantTarget: "all",
			wantErr: "daemonset kube-system/csi: no pod on node-a"},
		{name: "selector and exclusion", selector: "readiness=required", exclude: []string{"kube-system/csi", "kube-system/cni"}, wantTarget: "readiness=required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(objects...)
			opts := dsOptions()
			if tt.selector != "" {
				sel, err := labels.Parse(tt.selector)
				require.NoError(t, err)
				opts.Selector = sel
			}
			opts.Exclude = tt.exclude
			c := checks.NewDaemonSets(adapt.Clientset(client), "node-a", opts)
			require.Equal(t, tt.wantTarget, c.Target())

			assertErr(t, checks.Execute(t.Context(), c, runTimeout).Err, tt.wantErr)
			require.GreaterOrEqual(t, len(client.Actions()), 2, "a node GET, then the DaemonSet LIST")
			list, ok := client.Actions()[1].(k8stesting.ListAction)
			require.True(t, ok)
			assert.Equal(t, tt.selector, list.GetListRestrictions().Labels.String(), "the selector goes to the API server")
		})
	}
}

func TestDaemonSetsForbidden(t *testing.T) {
	const gateRBAC = "forbidden: the daemonsets gate needs the RBAC of manifests/gates/daemonsets.yaml (kubectl apply -f manifests/gates/daemonsets.yaml)"
	tests := []struct {
		verb, resource string
		names          []string
		wantErr        string
	}{
		{"get", "nodes", nil, `get node "node-a": forbidden, check the agent's RBAC`},
		{"list", "daemonsets", nil, "list daemonsets: " + gateRBAC},
		{"get", "daemonsets", []string{"kube-system/cilium"}, "get daemonset kube-system/cilium: " + gateRBAC},
		{"list", "pods", nil, "list pods on node-a in kube-system: " + gateRBAC},
	}
	for _, tt := range tests {
		t.Run(tt.verb+" "+tt.resource, func(t *testing.T) {
			client := fake.NewClientset(newNode(), daemonSet("cilium", nil))
			client.PrependReactor(tt.verb, tt.resource, forbidden(schema.GroupResource{Resource: tt.resource}))
			opts := dsOptions()
			opts.Names = tt.names

			res := checks.Execute(t.Context(), checks.NewDaemonSets(adapt.Clientset(client), "node-a", opts), time.Second)

			require.Error(t, res.Err)
			assert.Contains(t, res.Err.Error(), tt.wantErr)
		})
	}
}

// TestDaemonSetsListPodsPerNamespace: pods are listed only in the namespaces of the required
// DaemonSets, each list with the node's field selector, so the pod reads can be granted by
// Roles in those namespaces.
func TestDaemonSetsListPodsPerNamespace(t *testing.T) {
	cilium := daemonSet("cilium", nil)
	logs := daemonSet("fluent-bit", func(ds *appsv1.DaemonSet) { ds.Namespace = "logging" })
	csi := daemonSet("ebs-csi-node", nil)
	client := fake.NewClientset(newNode(), cilium, logs, csi,
		daemonPod(cilium, "cilium-1", "node-a", corev1.PodRunning, true),
		daemonPod(logs, "fluent-bit-1", "node-a", corev1.PodRunning, true),
		daemonPod(csi, "ebs-csi-node-1", "node-a", corev1.PodRunning, true))

	res := checks.Execute(t.Context(), checks.NewDaemonSets(adapt.Clientset(client), "node-a", dsOptions()), time.Second)
	require.NoError(t, res.Err)

	var namespaces []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		list, ok := a.(k8stesting.ListAction)
		require.True(t, ok, "pods are only listed, got %s", a.GetVerb())
		assert.Equal(t, "spec.nodeName=node-a", list.GetListRestrictions().Fields.String())
		namespaces = append(namespaces, a.GetNamespace())
	}
	assert.Equal(t, []string{"kube-system", "logging"}, namespaces, "one list per namespace of a required DaemonSet")
}
