package chart_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/chart"
)

// renamed is the nameOverride of the tests below.
const renamed = "edge"

// objectRef is an object as a reference names it: kind, namespace (empty when cluster-scoped)
// and name.
type objectRef struct{ kind, namespace, name string }

func (r objectRef) String() string { return r.kind + " " + r.namespace + "/" + r.name }

// rendered are the objects of a render by objectRef, each decoded as unstructured.
func rendered(objects map[string]chart.Object) map[objectRef]*unstructured.Unstructured {
	out := map[objectRef]*unstructured.Unstructured{}
	for _, o := range objects {
		u := &unstructured.Unstructured{Object: o}
		out[objectRef{u.GetKind(), u.GetNamespace(), u.GetName()}] = u
	}
	return out
}

// as converts a rendered object into its API type.
func as[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	return decode[T](t, map[string]chart.Object{"o": u.Object}, "o")
}

// TestNameOverride: with nameOverride, every object the chart renders (every switch on, the
// hooks of helm test and helm uninstall among them) is named by it, and every reference
// between them names an object that is rendered: the ServiceAccount, PriorityClass and
// ConfigMaps of the pods, the roles of the bindings and their subjects, the policies of the
// policy bindings, the uninstall Job's --daemonset and --creation-policy-binding and its
// Roles' resourceNames, the PodMonitor's selector, and the alerts that name the DaemonSet and
// the policies. The agent pods' app.kubernetes.io/name, the DaemonSet's selector, is the
// name too, so two releases never select each other's pods.
func TestNameOverride(t *testing.T) {
	flags := append([]string{"--set", "nameOverride=" + renamed}, allSwitches...)
	objects := rendered(renderAll(t, flags...))
	require.NotEmpty(t, objects)

	for ref, o := range objects {
		assert.True(t, ref.name == renamed || strings.HasPrefix(ref.name, renamed+"-"), "%s is not named after %s", ref, renamed)
		assert.NotContains(t, ref.name, "nodeready", ref.String())
		name := o.GetLabels()["app.kubernetes.io/name"]
		assert.True(t, name == renamed || strings.HasPrefix(name, renamed+"-"), "%s: app.kubernetes.io/name %q", ref, name)
	}

	ns := framework.Namespace
	exists := func(ref objectRef, what string) {
		t.Helper()
		assert.Contains(t, objects, ref, "%s names %s, which is not rendered", what, ref)
	}

	// The pods: the agents, the helm test pod and the uninstall Job's.
	ds := as[appsv1.DaemonSet](t, objects[objectRef{"DaemonSet", ns, renamed}])
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": renamed}, ds.Spec.Selector.MatchLabels)
	assert.Equal(t, renamed, ds.Spec.Template.Labels["app.kubernetes.io/name"])
	pods := map[string]corev1.PodSpec{"the DaemonSet": ds.Spec.Template.Spec}
	exists(objectRef{"PriorityClass", "", ds.Spec.Template.Spec.PriorityClassName}, "the DaemonSet")
	testPod := as[corev1.Pod](t, objects[objectRef{"Pod", ns, renamed + "-test"}])
	assert.NotEqual(t, renamed, testPod.Labels["app.kubernetes.io/name"], "the DaemonSet would adopt the helm test pod")
	pods["the helm test pod"] = testPod.Spec
	job := as[batchv1.Job](t, objects[objectRef{"Job", ns, renamed + "-uninstall"}])
	pods["the uninstall Job"] = job.Spec.Template.Spec
	for what, spec := range pods {
		exists(objectRef{"ServiceAccount", ns, spec.ServiceAccountName}, what)
		var refs int
		for _, c := range spec.Containers {
			for _, from := range c.EnvFrom {
				require.NotNil(t, from.ConfigMapRef, what)
				exists(objectRef{"ConfigMap", ns, from.ConfigMapRef.Name}, what)
				refs++
			}
		}
		assert.Positive(t, refs, "%s reads no ConfigMap", what)
	}
	assert.Equal(t, renamed, ds.Spec.Template.Spec.ServiceAccountName)
	assert.Equal(t, renamed, testPod.Spec.ServiceAccountName, "the test runs as the agent")

	// The uninstall Job deletes the DaemonSet and the creation-time policy's binding.
	args := job.Spec.Template.Spec.Containers[0].Args
	assert.Contains(t, args, "--daemonset="+ns+"/"+renamed)
	exists(objectRef{"DaemonSet", ns, renamed}, "--daemonset")
	assert.Contains(t, args, "--creation-policy-binding="+renamed+"-startup-taint")
	exists(objectRef{"MutatingAdmissionPolicyBinding", "", renamed + "-startup-taint"}, "--creation-policy-binding")

	// Bindings: their roles and subjects; roles: the objects they name.
	resourceKinds := map[string]string{"daemonsets": "DaemonSet", "mutatingadmissionpolicybindings": "MutatingAdmissionPolicyBinding", "configmaps": "ConfigMap"}
	var bindings, policyBindings int
	for ref, o := range objects {
		switch ref.kind {
		case "RoleBinding", "ClusterRoleBinding":
			b := as[rbacv1.RoleBinding](t, o)
			exists(objectRef{b.RoleRef.Kind, map[string]string{"Role": ref.namespace}[b.RoleRef.Kind], b.RoleRef.Name}, ref.String())
			for _, s := range b.Subjects {
				exists(objectRef{s.Kind, s.Namespace, s.Name}, ref.String())
			}
			bindings++
		case "Role", "ClusterRole":
			for _, rule := range as[rbacv1.ClusterRole](t, o).Rules {
				for _, res := range rule.Resources {
					kind, own := resourceKinds[res]
					for _, name := range rule.ResourceNames {
						if own && strings.HasPrefix(name, renamed) {
							exists(objectRef{kind, map[bool]string{true: ref.namespace}[ref.kind == "Role"], name}, ref.String())
						}
						assert.NotContains(t, name, "nodeready", "%s: resourceNames", ref)
					}
				}
			}
		case "ValidatingAdmissionPolicyBinding":
			exists(objectRef{"ValidatingAdmissionPolicy", "", as[admissionv1.ValidatingAdmissionPolicyBinding](t, o).Spec.PolicyName}, ref.String())
			policyBindings++
		case "MutatingAdmissionPolicyBinding":
			name, _, _ := unstructured.NestedString(o.Object, "spec", "policyName")
			exists(objectRef{"MutatingAdmissionPolicy", "", name}, ref.String())
			policyBindings++
		}
	}
	assert.GreaterOrEqual(t, bindings, 10, "role bindings checked")
	assert.GreaterOrEqual(t, policyBindings, 5, "policy bindings checked")

	// The PodMonitor scrapes the agents of this release.
	selector, _, _ := unstructured.NestedStringMap(objects[objectRef{"PodMonitor", ns, renamed}].Object, "spec", "selector", "matchLabels")
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": renamed}, selector)

	// The alerts name the renamed DaemonSet and match the renamed taint policies, and the
	// names of the defaults no longer.
	rule := objects[objectRef{"PrometheusRule", ns, renamed}]
	require.NotNil(t, rule)
	data, err := rule.MarshalJSON()
	require.NoError(t, err)
	assert.Contains(t, string(data), "get ds "+renamed)
	policyRe := regexp.MustCompile(`policy=~\\"([^\\]+)\\"`).FindStringSubmatch(string(data))
	require.Len(t, policyRe, 2, "the NodeReadyTaintPolicyFailing matcher")
	matcher := regexp.MustCompile("^(?:" + policyRe[1] + ")$")
	for ref := range objects {
		if ref.kind == "MutatingAdmissionPolicy" {
			assert.Regexp(t, matcher, ref.name, "NodeReadyTaintPolicyFailing misses %s", ref)
		}
	}
	assert.NotRegexp(t, matcher, "nodeready-startup-taint")

	// NOTES.txt tells where the renamed objects are and how the plugin finds them.
	out, err := chart.RunHelm(t, "install", chart.Release, chart.Dir(t), "--namespace", ns, "--dry-run=client", "--set", "nameOverride="+renamed)
	require.NoError(t, err, out)
	assert.Contains(t, out, "the DaemonSet "+ns+"/"+renamed+",")
	assert.Contains(t, out, "kubectl nodeready --name "+renamed+" -n "+ns)
}

// TestNameOverrideLongest: a nameOverride of the most characters the chart accepts keeps
// every name within 63 characters, a DNS label's bound, and one more is refused.
func TestNameOverrideLongest(t *testing.T) {
	longest := strings.Repeat("n", 46)
	flags := append([]string{"--set", "nameOverride=" + longest}, allSwitches...)
	var top string
	for ref := range rendered(renderAll(t, flags...)) {
		assert.LessOrEqual(t, len(ref.name), 63, ref.String())
		if len(ref.name) > len(top) {
			top = ref.name
		}
	}
	assert.Len(t, top, 63, "the bound is not tight: %s", top)
}

// TestBadNameOverrideFails: a nameOverride that is no DNS label, or too long for the names
// it starts, is refused by name, by the schema and, without it (--skip-schema-validation),
// by the templates.
func TestBadNameOverrideFails(t *testing.T) {
	for _, tc := range []struct {
		value        string
		schema, tmpl string
	}{
		{"Edge", "'Edge' does not match pattern", `nameOverride: "Edge": must be a DNS label`},
		{"edge.pool", "'edge.pool' does not match pattern", `nameOverride: "edge.pool": must be a DNS label`},
		{"edge-", "'edge-' does not match pattern", `nameOverride: "edge-": must be a DNS label`},
		{strings.Repeat("n", 47), "maxLength: got 47, want 46", "nameOverride: " + strings.Repeat("n", 47) + ": must be at most 46 characters"},
	} {
		t.Run(fmt.Sprintf("%.12s", tc.value), func(t *testing.T) {
			out, err := template(t, "--set", "nameOverride="+tc.value)
			require.Error(t, err, "rendered:\n%s", out)
			assert.Contains(t, err.Error(), "/nameOverride")
			assert.Contains(t, err.Error(), tc.schema)
			out, err = template(t, "--skip-schema-validation", "--set", "nameOverride="+tc.value)
			require.Error(t, err, "rendered:\n%s", out)
			assert.Contains(t, err.Error(), tc.tmpl)
		})
	}
}
