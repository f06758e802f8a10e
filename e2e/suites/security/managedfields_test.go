package security

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// An entry of managedFields as the tests compare it: who, when and which fields.
type entry struct {
	Manager, Operation, Subresource, Time string
	Fields                                map[string]any
}

func entries(t *testing.T, n *corev1.Node) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	for _, f := range n.ManagedFields {
		e := entry{Manager: f.Manager, Operation: string(f.Operation), Subresource: f.Subresource}
		if f.Time != nil {
			e.Time = f.Time.UTC().Format(time.RFC3339)
		}
		if f.FieldsV1 != nil {
			require.NoError(t, json.Unmarshal(f.FieldsV1.Raw, &e.Fields))
		}
		out[f.Manager+" "+e.Operation+" "+f.Subresource] = e
	}
	return out
}

// withoutTaints is e without the taint list: the node lifecycle controller taints the test's
// nodes (not-ready) whenever its loop comes by, and the taint list's ownership moves to it then.
func withoutTaints(e entry) entry {
	e.Fields = maps.Clone(e.Fields)
	if spec, ok := e.Fields["f:spec"].(map[string]any); ok {
		spec = maps.Clone(spec)
		delete(spec, "f:taints")
		if e.Fields["f:spec"] = spec; len(spec) == 0 {
			delete(e.Fields, "f:spec")
		}
	}
	return e
}

// index is the position of manager's main-resource Update entry in n's managedFields.
func index(t *testing.T, n *corev1.Node, manager string) int {
	t.Helper()
	for i, f := range n.ManagedFields {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationUpdate && f.Subresource == "" {
			return i
		}
	}
	require.Failf(t, "no entry", "node %s has no Update entry of %s", n.Name, manager)
	return -1
}

// creator is the field manager of the admin client that created the test's nodes:
// the one that owns the annotation createNode sets.
func creator(t *testing.T, n *corev1.Node) string {
	t.Helper()
	for _, e := range entries(t, n) {
		meta, _ := e.Fields["f:metadata"].(map[string]any)
		annotations, _ := meta["f:annotations"].(map[string]any)
		if _, ok := annotations["f:example.com/owner"]; ok && e.Operation == "Update" && e.Subresource == "" {
			return e.Manager
		}
	}
	require.Fail(t, "the node's creator has no managedFields entry")
	return ""
}

func patchAs(t *testing.T, c kubernetes.Interface, node, manager, patch string) error {
	t.Helper()
	pt := types.MergePatchType
	if patch[0] == '[' {
		pt = types.JSONPatchType
	}
	_, err := c.CoreV1().Nodes().Patch(t.Context(), node, pt, []byte(patch), metav1.PatchOptions{FieldManager: manager})
	return err
}

// settled waits for the controller manager's first writes of a new node: the TTL controller's
// annotation, and the node lifecycle controller's pass that takes off the not-ready taint the
// API server's admission put on a node with no conditions. Both are one entry of
// managedFields, kube-controller-manager's; at the cap of ten update entries, that entry
// arriving later would fold the oldest ones mid-test and move every entry a test addresses by
// position. The lifecycle controller writes again only after the node's startup grace period.
func settled(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	require.NoError(t, framework.Poll(t, func(context.Context) (bool, error) {
		n := framework.GetNode(t, c, name)
		_, ttl := n.Annotations["node.alpha.kubernetes.io/ttl"]
		notReady := slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == corev1.TaintNodeNotReady })
		return ttl && !notReady, nil
	}), "node %s: the controller manager's first writes", name)
}

func retaint(t *testing.T, c kubernetes.Interface, node, manager string) {
	t.Helper()
	require.NoError(t, patchAs(t, c, node, manager,
		`[{"op":"add","path":"/spec/taints/-","value":{"key":"node-ready/unverified","value":"true","effect":"NoSchedule"}}]`))
}

// TestAgentCannotRewriteManagedFields: on its own node the agent's token may not
// rewrite who owns which field (server-side apply decides conflicts and removals
// by it), while its releases, which move the ownership of what they change the
// way the API server does, still pass.
func TestAgentCannotRewriteManagedFields(t *testing.T) {
	cp, admin, nodeA, _, agentA := twoNodes(t)
	waitForPolicy(t, admin, agentA)
	owner := creator(t, framework.GetNode(t, admin, nodeA))
	const refused = "may not rewrite managedFields"

	// ops are JSON Patch operations on the creator's entry at its position (at); the position
	// is read right before the write and pinned by a test op on the entry's manager, since the
	// controllers beside the API server add entries to the same node meanwhile.
	atCreator := func(ops string) func(at string) string {
		return func(at string) string {
			return `[{"op":"test","path":"` + at + `/manager","value":"` + owner + `"},` + strings.ReplaceAll(ops, "AT", at) + `]`
		}
	}
	fixed := func(patch string) func(string) string { return func(string) string { return patch } }
	forbidden := []struct {
		name, manager string
		patch         func(at string) string
		// discarded: the API server may revert the change itself before admission, which
		// then sees none (IgnoreManagedFieldsTimestampsTransformer, k8s.io/apiserver
		// endpoints/handlers/fieldmanager: a write that changes only managedFields'
		// times is no write): nil then, with nothing changed, is as good as a refusal.
		discarded bool
	}{
		{name: "reset managedFields", manager: wellknown.FieldManager, patch: fixed(`{"metadata":{"managedFields":[{}]}}`)},
		{name: "move another manager's time", manager: wellknown.FieldManager,
			patch: atCreator(`{"op":"replace","path":"AT/time","value":"2001-01-01T00:00:00Z"}`), discarded: true},
		{name: "move another manager's time beside its own label", manager: wellknown.FieldManager,
			patch: atCreator(`{"op":"replace","path":"AT/time","value":"2001-01-01T00:00:00Z"},` +
				`{"op":"add","path":"/metadata/labels/node-ready~1verified","value":"true"}`)},
		{name: "drop another manager's entry", manager: wellknown.FieldManager, patch: atCreator(`{"op":"remove","path":"AT"}`)},
		{name: "give another manager a field", manager: wellknown.FieldManager, patch: atCreator(`{"op":"add","path":"AT/fieldsV1/f:metadata/f:labels/f:example.com~1evil","value":{}}`)},
		{name: "take a label from another manager", manager: wellknown.FieldManager, patch: atCreator(`{"op":"remove","path":"AT/fieldsV1/f:metadata/f:labels/f:pool"}`)},
		{name: "add an entry for another manager", manager: wellknown.FieldManager, patch: fixed(`[{"op":"add","path":"/metadata/managedFields/-","value":{"manager":"kubelet","operation":"Update","apiVersion":"v1",` +
			`"time":"2001-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:unschedulable":{}}}}}]`)},
		{name: "claim another manager's field in its own entry", manager: wellknown.FieldManager, patch: fixed(`[{"op":"add","path":"/metadata/managedFields/-","value":{"manager":"nodeready","operation":"Update","apiVersion":"v1",` +
			`"time":"2001-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:pool":{}}}}}}]`)},
		{name: "write its label as the creator", manager: owner, patch: fixed(`{"metadata":{"labels":{"node-ready/verified":"true"}}}`)},
		{name: "write its label as a new manager", manager: "kubelet", patch: fixed(`{"metadata":{"labels":{"node-ready/verified":"true"}}}`)},
	}
	for _, w := range forbidden {
		t.Run(w.name, func(t *testing.T) {
			before := entries(t, framework.GetNode(t, admin, nodeA))
			var err error
			for range 5 { // a 422 is the test op: the entry moved; read its position again
				at := fmt.Sprintf("/metadata/managedFields/%d", index(t, framework.GetNode(t, admin, nodeA), owner))
				if err = patchAs(t, agentA, nodeA, w.manager, w.patch(at)); !apierrors.IsInvalid(err) {
					break
				}
			}
			after := framework.GetNode(t, admin, nodeA)
			if err == nil && w.discarded {
				t.Logf("the API server discarded the change itself before admission")
			} else {
				require.Error(t, err, "got through: managedFields before %v, after %v", before, entries(t, after))
				assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
				assert.Contains(t, err.Error(), refused)
			}
			assert.Equal(t, withoutTaints(before[owner+" Update "]), withoutTaints(entries(t, after)[owner+" Update "]), "the creator's entry changed")
			assert.NotContains(t, managers(after), "kubelet")
			assert.NotContains(t, after.Labels, "node-ready/verified")
		})
	}

	p := nodepatch.New(adapt.Clientset(agentA), nodeA, releaseSpec)
	release := func(t *testing.T) {
		t.Helper()
		outcome, err := p.Release(t.Context(), map[string]string{"node-ready/verified-at": "2026-11-27T00:00:00Z"})
		require.NoError(t, err)
		assert.Equal(t, nodepatch.Patched, outcome)
	}

	t.Run("a release takes the taint list from the manager that wrote it", func(t *testing.T) {
		before := entries(t, framework.GetNode(t, admin, nodeA))
		var taints entry // whoever wrote the list last: the creator, or the node lifecycle controller's taint
		for _, e := range before {
			if spec, ok := e.Fields["f:spec"].(map[string]any); ok && spec["f:taints"] != nil && e.Manager != wellknown.FieldManager {
				taints = e
			}
		}
		require.NotEmpty(t, taints.Manager, "another manager owns the taint list")
		release(t)
		after := entries(t, framework.GetNode(t, admin, nodeA))
		want := taints
		want.Fields = maps.Clone(taints.Fields)
		spec := maps.Clone(taints.Fields["f:spec"].(map[string]any))
		delete(spec, "f:taints")
		want.Fields["f:spec"] = spec
		if len(spec) == 0 {
			delete(want.Fields, "f:spec")
		}
		// The owner may write the node again meanwhile (the node lifecycle controller does), so
		// what is compared is what it must keep: every field of its entry but the taint list.
		key := taints.Manager + " Update "
		if len(want.Fields) == 0 {
			assert.NotContains(t, after, key)
		} else {
			kept := after[key].Fields
			for k, v := range want.Fields {
				if sub, ok := v.(map[string]any); ok {
					for f := range sub {
						assert.Contains(t, kept[k], f, "%s lost %s.%s, not only the taint list", taints.Manager, k, f)
					}
				} else {
					assert.Contains(t, kept, k, "%s lost %s", taints.Manager, k)
				}
			}
			if spec, ok := kept["f:spec"].(map[string]any); ok && after[key].Time == taints.Time {
				assert.NotContains(t, spec, "f:taints", "%s still owns the taint list", taints.Manager)
			}
		}
		assert.Equal(t, withoutTaints(before[owner+" Update "]), withoutTaints(after[owner+" Update "]), "the creator's entry changed")
		assert.Contains(t, after[wellknown.FieldManager+" Update "].Fields["f:spec"], "f:taints")
	})

	t.Run("an entry that held only the taint list goes with it", func(t *testing.T) {
		retaint(t, admin, nodeA, "readiness-controller")
		held := entries(t, framework.GetNode(t, admin, nodeA))["readiness-controller Update "]
		require.Equal(t, map[string]any{"f:spec": map[string]any{"f:taints": map[string]any{}}}, held.Fields)
		release(t)
		assert.NotContains(t, managers(framework.GetNode(t, admin, nodeA)), "readiness-controller")
	})

	t.Run("past ten update entries the API server folds the oldest, also under a release", func(t *testing.T) {
		// A node of its own whose agent has never written it, filled to ten update
		// entries: the agent's first write makes eleven, and the API server folds.
		nodeC := createNode(t, admin, "node-c")
		settled(t, admin, nodeC)
		agentC := agentClient(t, cp, agentPod(t, admin, nodeC))
		for k := 0; ; k++ {
			n := framework.GetNode(t, admin, nodeC)
			updates := 0
			for _, f := range n.ManagedFields {
				if f.Operation == metav1.ManagedFieldsOperationUpdate {
					updates++
				}
			}
			require.NotContains(t, managers(n), "ancient-changes", "folded before the agent wrote")
			if updates == 10 {
				break
			}
			require.NoError(t, patchAs(t, admin, nodeC, fmt.Sprintf("example-%d", k),
				fmt.Sprintf(`{"metadata":{"annotations":{"example.com/writer-%d":"x"}}}`, k)))
		}
		// The fold takes the oldest entries by the second they were written in: the creator
		// writes once more, so that its entry is among the newest, whatever second the node was
		// created in, and stays for the subtests that try to drop it. An entry of its own
		// already, this write adds none.
		require.NoError(t, patchAs(t, admin, nodeC, owner, `{"metadata":{"annotations":{"example.com/owner":"team-b"}}}`))
		outcome, err := nodepatch.New(adapt.Clientset(agentC), nodeC, releaseSpec).Release(t.Context(), nil)
		require.NoError(t, err)
		assert.Equal(t, nodepatch.Patched, outcome)
		after := framework.GetNode(t, admin, nodeC)
		assert.Contains(t, managers(after), "ancient-changes")
		assert.Contains(t, managers(after), wellknown.FieldManager)
		assert.Equal(t, "true", after.Labels["node-ready/verified"])
		assert.False(t, strings.Contains(fmt.Sprint(after.Spec.Taints), "node-ready/unverified"))

		// node-c is at the cap now, ancient-changes and the agent's entry on it: a write of the
		// agent's adds no entry, so the API server folds nothing, and an entry that goes is one
		// the token dropped. That is refused for the oldest entry as for any other.
		var newest string // the example writer the fold left, the last to write
		for _, m := range managers(framework.GetNode(t, admin, nodeC)) {
			if strings.HasPrefix(m, "example-") {
				newest = m
			}
		}
		for _, manager := range []string{"ancient-changes", newest, owner} {
			t.Run("on a node that folded before, dropping "+manager, func(t *testing.T) {
				before := framework.GetNode(t, admin, nodeC)
				require.Contains(t, managers(before), manager)
				at := fmt.Sprintf("/metadata/managedFields/%d", slices.IndexFunc(before.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
					return f.Manager == manager && f.Subresource == ""
				}))
				err := patchAs(t, agentC, nodeC, wellknown.FieldManager,
					`[{"op":"test","path":"`+at+`/manager","value":"`+manager+`"},{"op":"remove","path":"`+at+`"}]`)
				require.Error(t, err, "got through")
				assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
				assert.Contains(t, err.Error(), refused)
				assert.Contains(t, managers(framework.GetNode(t, admin, nodeC)), manager)
			})
		}
	})
}
