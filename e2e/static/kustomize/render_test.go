package kustomize_test

import (
	"github.com/nodeready/nodeready/e2e/framework/kustomize"

	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestBaseIsManifests: `kubectl kustomize manifests/` renders exactly the objects that
// `kubectl apply -f manifests/` applies, and each optional part's component exactly the
// objects of its folder, so the kustomization files list every file and there is one copy
// of each object.
func TestBaseIsManifests(t *testing.T) {
	repo := framework.RepoRoot(t)
	for dir, leftOut := range map[string][]string{
		"manifests":                nil,
		"manifests/gates":          nil,
		"manifests/replace-node":   nil,
		"manifests/monitoring":     nil,
		"manifests/node-creation":  nil,
		"manifests/label-to-taint": nil,
	} {
		t.Run(dir, func(t *testing.T) {
			want := ids(decodeDir(t, filepath.Join(repo, dir), leftOut))
			require.NotEmpty(t, want)
			assert.ElementsMatch(t, want, ids(render(t, filepath.Join(repo, dir))))
		})
	}
}

// TestOverlays renders every overlay in kustomize/ and checks what each changes.
func TestOverlays(t *testing.T) {
	repo := framework.RepoRoot(t)
	base := render(t, filepath.Join(repo, "manifests"))
	overlays := filepath.Join(repo, "kustomize")

	t.Run("image", func(t *testing.T) {
		objs := render(t, filepath.Join(overlays, "image"))
		assert.ElementsMatch(t, ids(base), ids(objs))
		assert.Equal(t, []string{kustomize.NewImage}, images(t, objs))
	})
	t.Run("namespace", func(t *testing.T) {
		objs := render(t, filepath.Join(overlays, "namespace"))
		assertNamespace(t, objs, base)
	})
	t.Run("keys", func(t *testing.T) {
		objs := render(t, filepath.Join(overlays, "keys"))
		assert.ElementsMatch(t, ids(base), ids(objs))
		assertKeys(t, objs)
	})
	t.Run("readiness: the startup taint under readiness.k8s.io/, put on at creation", func(t *testing.T) {
		objs := render(t, filepath.Join(overlays, "readiness"))
		want := append(ids(base), ids(decodeFile(t, filepath.Join(repo, "manifests", "node-creation", "startup-taint.yaml")))...)
		assert.ElementsMatch(t, want, ids(objs))
		const key = "'readiness.k8s.io/nodeready-unverified'"
		cm := find(t, objs, "ConfigMap", "nodeready-config")
		taintKey, _, _ := unstructured.NestedString(cm.Object, "data", "TAINT_KEY")
		assert.Equal(t, strings.Trim(key, "'"), taintKey)
		assert.Equal(t, key, variable(t, find(t, objs, "ValidatingAdmissionPolicy", "nodeready-own-node"), "taintKey"))
		assert.Equal(t, key, variable(t, find(t, objs, "MutatingAdmissionPolicy", "nodeready-startup-taint"), "taintKey"))
	})
	t.Run("prepull", func(t *testing.T) {
		objs := render(t, filepath.Join(overlays, "prepull"))
		ds := find(t, objs, "DaemonSet", "nodeready")
		inits, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "initContainers")
		require.NotEmpty(t, inits)
		assert.Equal(t, "nodeready-bin", inits[0].(map[string]any)["name"], "the binary is copied first")
		assertNoCPULimit(t, ds)
	})
	t.Run("optional", func(t *testing.T) {
		objs := render(t, filepath.Join(overlays, "optional"))
		want := ids(base)
		for _, dir := range []string{"gates", "networkpolicy", "replace-node", "monitoring"} {
			want = append(want, ids(decodeDir(t, filepath.Join(repo, "manifests", dir), nil))...)
		}
		want = append(want, ids(decodeFile(t, filepath.Join(repo, "manifests", "node-creation", "startup-taint.yaml")))...)
		assert.ElementsMatch(t, want, ids(objs))
		// The monitoring component has the scraped agents wait for a last scrape: its
		// ConfigMap nodeready-monitoring, which the DaemonSet reads after nodeready-config,
		// the same object `kubectl apply -f manifests/monitoring/` creates.
		cm := find(t, objs, "ConfigMap", "nodeready-monitoring")
		wait, _, _ := unstructured.NestedString(cm.Object, "data", "METRICS_FINAL_SCRAPE_TIMEOUT")
		assert.Equal(t, "24s", wait)
		base, _, _ := unstructured.NestedString(find(t, render(t, filepath.Join(repo, "manifests")), "ConfigMap", "nodeready-config").Object, "data", "METRICS_FINAL_SCRAPE_TIMEOUT")
		assert.Equal(t, "0s", base, "not scraped, the agents do not wait")
		envFrom, _, _ := unstructured.NestedSlice(find(t, objs, "DaemonSet", "nodeready").Object, "spec", "template", "spec", "containers")
		sources, _ := envFrom[0].(map[string]any)["envFrom"].([]any)
		require.Len(t, sources, 2)
		assert.Equal(t, map[string]any{"name": "nodeready-monitoring", "optional": true}, sources[1].(map[string]any)["configMapRef"], "read last, so it wins")
	})
	t.Run("example: image, namespace and keys with the optional parts", func(t *testing.T) {
		objs := render(t, filepath.Join(overlays, "example"))
		assert.Equal(t, []string{kustomize.NewImage}, images(t, objs))
		assertNamespace(t, objs, base)
		assertKeys(t, objs)
		// The taint at node creation is the new one, and label-to-taint leaves it alone.
		mp := find(t, objs, "MutatingAdmissionPolicy", "nodeready-startup-taint")
		assert.Equal(t, "'"+kustomize.NewTaint+"'", variable(t, mp, "taintKey"))
		assert.Equal(t, "'NoSchedule'", variable(t, mp, "taintEffect"))
		l2t := find(t, objs, "MutatingAdmissionPolicy", "nodeready-label-to-taint")
		assert.Equal(t, "'"+kustomize.NewTaint+"'", variable(t, l2t, "startupTaintKey"))
	})
	t.Run("label-to-taint: the policy with a list of rules", func(t *testing.T) {
		objs := render(t, filepath.Join(overlays, "label-to-taint"))
		want := append(ids(base), ids(decodeDir(t, filepath.Join(repo, "manifests", "label-to-taint"), nil))...)
		assert.ElementsMatch(t, want, ids(objs))
		mp := find(t, objs, "MutatingAdmissionPolicy", "nodeready-label-to-taint")
		assert.Equal(t, "[\n"+
			"  {'label': 'dedicated', 'value': 'ci', 'taintKey': 'dedicated', 'taintValue': 'ci', 'taintEffect': 'NoSchedule'},\n"+
			"  {'label': 'example.com/pool', 'value': 'gpu', 'taintKey': 'nvidia.com/gpu', 'taintValue': 'present', 'taintEffect': 'NoSchedule'}\n"+
			"]", variable(t, mp, "rules"))
		assert.Equal(t, "'"+wellknown.TaintKey+"'", variable(t, mp, "startupTaintKey"))
		// The agent reaches the nodes each rule taints.
		tolerations, _, _ := unstructured.NestedSlice(find(t, objs, "DaemonSet", "nodeready").Object, "spec", "template", "spec", "tolerations")
		for _, taint := range []map[string]any{
			{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"},
			{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
		} {
			assert.Contains(t, tolerations, taint)
		}
	})

	t.Run("a namePrefix and another namespace: the policies still guard the agent's ServiceAccount", func(t *testing.T) {
		objs := render(t, kustomize.PrefixedOverlay(t, repo))
		sa := find(t, objs, "ServiceAccount", "prod-nodeready")
		assert.Equal(t, kustomize.NewNamespace, sa.GetNamespace())
		// The policies guard whoever holds the agent's ClusterRole: its binding names the
		// renamed ServiceAccount where it moved, and no policy names it itself.
		binding := find(t, objs, "ClusterRoleBinding", "prod-nodeready")
		role, _, _ := unstructured.NestedString(binding.Object, "roleRef", "name")
		assert.Equal(t, "prod-nodeready", role)
		subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
		assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "prod-nodeready", "namespace": kustomize.NewNamespace}}, subjects)
		rules, _, _ := unstructured.NestedSlice(find(t, objs, "ClusterRole", "prod-nodeready").Object, "rules")
		assert.Contains(t, rules, map[string]any{"apiGroups": []any{"node-ready.io"}, "resources": []any{"agents"}, "verbs": []any{"verify"}})
		for _, o := range objs {
			if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
				_, found, _ := unstructured.NestedMap(o.Object, "spec", "paramRef")
				assert.False(t, found, "%s has a parameter", o.GetName())
			}
		}
	})

	// Every overlay is tested above, so a new one needs a case here.
	entries, err := os.ReadDir(overlays)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() && e.Name() != "components" {
			assert.Contains(t, []string{"image", "namespace", "keys", "prepull", "optional", "example", "label-to-taint", "readiness"}, e.Name(), "overlay without a test")
		}
	}
}

// assertNamespace: what belongs to the agent moved to kustomize.NewNamespace with everything that names
// its ServiceAccount; the Roles stay where what they grant lives; nothing else changed.
func assertNamespace(t *testing.T, objs, base []*unstructured.Unstructured) {
	t.Helper()
	ns := find(t, objs, "Namespace", kustomize.NewNamespace)
	assert.Equal(t, "nodeready", ns.GetLabels()["app.kubernetes.io/name"])
	stay := map[string]string{ // Role name -> namespace
		"nodeready-endpoints":   "default",
		"nodeready-events":      "default",
		"nodeready-cluster-dns": "kube-system",
	}
	for _, o := range objs {
		switch {
		case o.GetKind() == "Role" || o.GetKind() == "RoleBinding":
			assert.Equal(t, stay[o.GetName()], o.GetNamespace(), "%s %s stays", o.GetKind(), o.GetName())
		case o.GetNamespace() != "":
			assert.Equal(t, kustomize.NewNamespace, o.GetNamespace(), "%s %s moves", o.GetKind(), o.GetName())
		}
		if o.GetKind() == "RoleBinding" || o.GetKind() == "ClusterRoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			require.NotEmpty(t, subjects)
			for _, s := range subjects {
				assert.Equal(t, kustomize.NewNamespace, s.(map[string]any)["namespace"], "subject of %s %s", o.GetKind(), o.GetName())
			}
		}
	}
	// Same objects, names and kinds as the base, wherever they live.
	names := func(objs []*unstructured.Unstructured) (out []string) {
		for _, o := range objs {
			if o.GetKind() != "Namespace" {
				out = append(out, o.GetKind()+"/"+o.GetName())
			}
		}
		return out
	}
	want := names(base)
	for _, o := range objs {
		if !slices.Contains(want, o.GetKind()+"/"+o.GetName()) {
			continue
		}
		want = slices.DeleteFunc(want, func(s string) bool { return s == o.GetKind()+"/"+o.GetName() })
	}
	assert.Empty(t, want, "objects of the base missing")
	assertNowhere(t, objs, "kube-system:nodeready")
}

// assertKeys: the new label and taint keys everywhere, the shipped ones nowhere.
func assertKeys(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	cm := find(t, objs, "ConfigMap", "nodeready-config")
	data := cm.Object["data"].(map[string]any)
	assert.Equal(t, kustomize.NewLabel, data["VERIFIED_LABEL"])
	assert.Equal(t, kustomize.NewTaint, data["TAINT_KEY"])
	assert.Equal(t, "true", data["TAINT_VALUE"])
	assert.Equal(t, "NoSchedule", data["TAINT_EFFECT"])

	ds := find(t, objs, "DaemonSet", "nodeready")
	terms, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "affinity", "nodeAffinity",
		"requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	require.Len(t, terms, 1)
	var doesNotExist []any
	for _, e := range terms[0].(map[string]any)["matchExpressions"].([]any) {
		if e.(map[string]any)["operator"] == "DoesNotExist" {
			doesNotExist = append(doesNotExist, e.(map[string]any)["key"])
		}
	}
	assert.Equal(t, []any{kustomize.NewLabel}, doesNotExist)
	tolerations, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "tolerations")
	assert.Contains(t, tolerations, map[string]any{"key": kustomize.NewTaint, "operator": "Exists"}, "the agent tolerates the new taint")

	vap := find(t, objs, "ValidatingAdmissionPolicy", "nodeready-own-node")
	assert.Equal(t, "'"+kustomize.NewLabel+"'", variable(t, vap, "labelKey"))
	assert.Equal(t, "'"+kustomize.NewTaint+"'", variable(t, vap, "taintKey"))
	assert.Equal(t, "'NoSchedule'", variable(t, vap, "taintEffect"))

	// No place was missed: the shipped keys are nowhere in the objects (the condition type
	// node-ready/Verified and the opt-out label node-ready/skip-startup-taint are other names).
	assertNowhere(t, objs, wellknown.VerifiedLabel)
	assertNowhere(t, objs, wellknown.TaintKey)
}

// render runs `kubectl kustomize dir` and decodes its objects.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kustomize.KubectlPath(t), "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kubectl kustomize %s:\n%s", dir, stderr.String())
	return decode(t, &stdout, dir)
}

// decodeDir decodes the objects of the .yaml files of dir, as `kubectl apply -f dir` reads them.
func decodeDir(t *testing.T, dir string, leftOut []string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if !slices.Contains(leftOut, filepath.Base(f)) {
			objs = append(objs, decodeFile(t, f)...)
		}
	}
	return objs
}

func decodeFile(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	return decode(t, f, path)
}

func decode(t *testing.T, r io.Reader, what string) []*unstructured.Unstructured {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err, what)
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// ids names each object by kind, namespace and name.
func ids(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	require.FailNow(t, "not rendered", "%s %s", kind, name)
	return nil
}

// images lists the distinct images of the containers and init containers of every pod
// template.
func images(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			for _, c := range cs {
				img := c.(map[string]any)["image"].(string)
				if !slices.Contains(out, img) {
					out = append(out, img)
				}
			}
		}
	}
	return out
}

// variable returns the expression of a policy's variable.
func variable(t *testing.T, policy *unstructured.Unstructured, name string) string {
	t.Helper()
	vars, _, _ := unstructured.NestedSlice(policy.Object, "spec", "variables")
	for _, v := range vars {
		if m := v.(map[string]any); m["name"] == name {
			return m["expression"].(string)
		}
	}
	require.FailNow(t, "no variable", "%s in %s", name, policy.GetName())
	return ""
}

// assertNowhere fails for every object that holds s in any key or value.
func assertNowhere(t *testing.T, objs []*unstructured.Unstructured, s string) {
	t.Helper()
	for _, o := range objs {
		data, err := o.MarshalJSON()
		require.NoError(t, err)
		assert.False(t, strings.Contains(string(data), s), "%s %s still names %s", o.GetKind(), o.GetName(), s)
	}
}

// TestTolerateAllComponent: kustomize/components/tolerate-all replaces the DaemonSet's list
// of tolerations (the startup taint, every NoExecute taint) with one toleration of every
// taint, and changes nothing else.
func TestTolerateAllComponent(t *testing.T) {
	repo := framework.RepoRoot(t)
	base := render(t, filepath.Join(repo, "manifests"))
	// An overlay as a user writes one; kustomize takes only relative paths.
	dir := t.TempDir()
	rel := func(elem ...string) string {
		p, err := filepath.Rel(dir, filepath.Join(append([]string{repo}, elem...)...))
		require.NoError(t, err)
		return p
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n",
		rel("manifests"), rel("kustomize", "components", "tolerate-all"))), 0o644))
	objs := render(t, dir)
	assert.ElementsMatch(t, ids(base), ids(objs))
	tolerations := func(objs []*unstructured.Unstructured) []any {
		ts, _, _ := unstructured.NestedSlice(find(t, objs, "DaemonSet", "nodeready").Object, "spec", "template", "spec", "tolerations")
		return ts
	}
	assert.Equal(t, []any{
		map[string]any{"key": wellknown.TaintKey, "operator": "Exists"},
		map[string]any{"operator": "Exists", "effect": "NoExecute"},
	}, tolerations(base), "manifests/: the list")
	assert.Equal(t, []any{map[string]any{"operator": "Exists"}}, tolerations(objs))
	ds := find(t, objs, "DaemonSet", "nodeready")
	unstructured.RemoveNestedField(ds.Object, "spec", "template", "spec", "tolerations")
	baseDS := find(t, base, "DaemonSet", "nodeready")
	unstructured.RemoveNestedField(baseDS.Object, "spec", "template", "spec", "tolerations")
	assert.Equal(t, baseDS.Object, ds.Object, "only the tolerations change")
}

// assertNoCPULimit: no container of the agent's pod has a CPU limit. A limit is a CFS quota on
// the pod's cgroup, which throttled the sandbox, runc and the agent's start-up to a tenth of a
// core and cost 1.7 s of node Ready -> released on real nodes (BENCH.md, docs/operations.md).
func assertNoCPULimit(t *testing.T, ds *unstructured.Unstructured) {
	t.Helper()
	for _, field := range []string{"initContainers", "containers"} {
		cs, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", field)
		for _, c := range cs {
			limit, found, _ := unstructured.NestedString(c.(map[string]any), "resources", "limits", "cpu")
			assert.False(t, found, "%s %s: CPU limit %s", field, c.(map[string]any)["name"], limit)
		}
	}
}

// TestNoCPULimit: the agent's pod as `kubectl apply -f manifests/` installs it has no CPU limit.
func TestNoCPULimit(t *testing.T) {
	assertNoCPULimit(t, find(t, render(t, filepath.Join(framework.RepoRoot(t), "manifests")), "DaemonSet", "nodeready"))
}
