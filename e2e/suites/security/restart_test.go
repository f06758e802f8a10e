package security

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// restartServiceAccounts is how many ServiceAccounts the cluster of the restart test
// holds: a parameter informer over ServiceAccounts (what nodeready's policies used to
// take) needs a while to list that many after a start, and a policy that collects its
// parameter before its matchConditions refuses every write it matches meanwhile.
const restartServiceAccounts = 3000

// TestPoliciesRefuseNoOneAcrossARestart: nodeready's policies match every node write and
// every Event of the cluster, so they must never refuse one that is not the agent's while
// the API server starts. With thousands of ServiceAccounts in the cluster, kubelets (their
// node status), another controller (labels on nodes and Events about them) and the agent
// (its own condition) write as fast as they can while kube-apiserver is stopped and
// started again; not one of their writes is refused by nodeready's policies. Counted by the
// clients themselves. (RBAC refuses writes of its own for a moment after a start, before its
// informers have synced: that is the API server's, and the writers are told so.)
func TestPoliciesRefuseNoOneAcrossARestart(t *testing.T) {
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	admin := cp.Client()
	applyManifests(t, cp)
	ctx := t.Context()
	createServiceAccounts(t, admin, restartServiceAccounts)

	nodes := []string{createNode(t, admin, "node-a"), createNode(t, admin, "node-b"), createNode(t, admin, "node-c")}
	agentPod := agentPod(t, admin, nodes[0])
	agent := unthrottled(t, cp, namespace, serviceAccount, agentPod)
	waitForPolicy(t, admin, agent)
	other := controllerClient(t, cp, admin, nodes[1])

	var writers []*writer
	for _, n := range nodes {
		kubelet := kubeletClient(t, cp, n)
		writers = append(writers, &writer{name: "kubelet of " + n, write: func(ctx context.Context, i int) error {
			return heartbeat(ctx, kubelet, n, "KubeletReady", i)
		}})
	}
	writers = append(writers,
		&writer{name: "controller labelling nodes", write: func(ctx context.Context, i int) error {
			_, err := other.CoreV1().Nodes().Patch(ctx, nodes[i%len(nodes)], types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"labels":{"example.com/round":"r%d"}}}`, i), metav1.PatchOptions{})
			return err
		}},
		&writer{name: "controller's Events about nodes", write: func(ctx context.Context, i int) error {
			_, err := other.EventsV1().Events("default").Create(ctx, event(fmt.Sprintf("autoscaler-%d", i), nodes[i%len(nodes)], "example.com/autoscaler", "Scaled"), metav1.CreateOptions{})
			return err
		}},
		&writer{name: "agent's own condition", write: func(ctx context.Context, i int) error {
			return condition(ctx, agent, nodes[0], i)
		}},
	)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range writers {
		for range 4 { // as fast as they can: several writes of each on their way at once
			wg.Go(func() { w.run(ctx, stop) })
		}
	}
	time.Sleep(2 * time.Second)
	require.NoError(t, cp.StopAPIServer())
	time.Sleep(time.Second)
	started := time.Now()
	require.NoError(t, cp.StartAPIServer(ctx)) // returns once /readyz passes
	ready := time.Now()
	time.Sleep(10 * time.Second)
	close(stop)
	wg.Wait()

	for _, w := range writers {
		t.Logf("%s: %d writes, %d refused by nodeready's policies, %d by RBAC after the start, %d without an answer; "+
			"%d landed between the start and /readyz (%s), the first %s after the start",
			w.name, w.ok.Load(), len(w.refused), w.otherwise.Load(), w.unanswered.Load(), w.okBetween(started, ready),
			ready.Sub(started).Round(time.Millisecond), w.firstAfter(started).Sub(started).Round(time.Millisecond))
		assert.Empty(t, w.refused, "%s: writes refused", w.name)
		assert.Positive(t, w.okAfter(ready), "%s wrote nothing after the restart", w.name)
	}
}

// writer writes again and again until stop, and counts what the API server answered.
type writer struct {
	name  string
	write func(ctx context.Context, i int) error

	ok, unanswered, otherwise atomic.Int64
	mu                        sync.Mutex
	refused                   []string // the answers of nodeready's policies that refused a write
	landed                    []time.Time
}

func (w *writer) run(ctx context.Context, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := w.write(wctx, i)
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
			w.ok.Add(1)
			w.landed = append(w.landed, time.Now())
		case strings.Contains(err.Error(), "nodeready-own-"):
			// An admission policy names itself in its refusal, and in the error of one
			// that could not be evaluated (a parameter not yet synced).
			w.refused = append(w.refused, err.Error())
		case apierrors.IsForbidden(err):
			w.otherwise.Add(1) // RBAC, before its informers have synced after the start
		case apierrors.IsConflict(err):
		default:
			// No answer: the API server was down (connection refused, a timeout).
			w.unanswered.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
		w.mu.Unlock()
	}
}

func (w *writer) okBetween(from, to time.Time) (n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.landed {
		if at.After(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func (w *writer) okAfter(from time.Time) int { return w.okBetween(from, time.Now().Add(time.Hour)) }

func (w *writer) firstAfter(from time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.landed {
		if at.After(from) {
			return at
		}
	}
	return from
}

// createServiceAccounts creates n ServiceAccounts over ten namespaces.
func createServiceAccounts(t *testing.T, c kubernetes.Interface, n int) {
	t.Helper()
	ctx := t.Context()
	for ns := range 10 {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%d", ns)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for worker := range 8 {
		wg.Go(func() {
			for i := worker; i < n && errs[worker] == nil; i += 8 {
				_, errs[worker] = c.CoreV1().ServiceAccounts(fmt.Sprintf("team-%d", i%10)).Create(ctx,
					&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i)}}, metav1.CreateOptions{})
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// kubeletClient is a client as node's kubelet: system:node:<node> in system:nodes.
func kubeletClient(t *testing.T, cp *controlplane.ControlPlane, node string) kubernetes.Interface {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.kubeconfig")
	require.NoError(t, cp.WriteClientKubeconfig(path, "system:node:"+node, "system:nodes"))
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	cfg.QPS, cfg.Burst = fast, fast
	return kubernetes.NewForConfigOrDie(cfg)
}

// controllerClient is the pod-bound token of another controller that may label nodes and
// write Events, as an autoscaler does, its pod on node.
func controllerClient(t *testing.T, cp *controlplane.ControlPlane, admin kubernetes.Interface, node string) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	const name = "autoscaler"
	_, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "default"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"},
		Spec: corev1.PodSpec{ServiceAccountName: name, NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "c"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return unthrottled(t, cp, "default", name, pod)
}

// fast is the writers' client-side rate: as fast as the API server answers.
const fast = 1000

// unthrottled is a client with the pod-bound token of the pod, of the ServiceAccount
// namespace/name, without client-go's default limit of 5 requests a second.
func unthrottled(t *testing.T, cp *controlplane.ControlPlane, namespace, name string, pod *corev1.Pod) kubernetes.Interface {
	t.Helper()
	token, err := cp.PodToken(t.Context(), namespace, name, pod.Name, pod.UID)
	require.NoError(t, err)
	cfg := cp.TokenConfig(token)
	cfg.QPS, cfg.Burst = fast, fast
	return kubernetes.NewForConfigOrDie(cfg)
}

// heartbeat writes a condition of the node's status as its kubelet does, new each time.
func heartbeat(ctx context.Context, c kubernetes.Interface, node, reason string, i int) error {
	patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":%q,"message":"beat %d","lastHeartbeatTime":%q,"lastTransitionTime":"2026-11-27T00:00:00Z"}]}}`,
		reason, i, time.Now().UTC().Format(time.RFC3339))
	_, err := c.CoreV1().Nodes().PatchStatus(ctx, node, patch)
	return err
}

// condition writes the agent's condition on its own node, new each time.
func condition(ctx context.Context, c kubernetes.Interface, node string, i int) error {
	patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":%q,"status":"False","reason":"ChecksFailed","message":"round %d","lastHeartbeatTime":%q,"lastTransitionTime":"2026-11-27T00:00:00Z"}]}}`,
		wellknown.ConditionType, i, time.Now().UTC().Format(time.RFC3339))
	_, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: wellknown.FieldManager}, "status")
	return err
}
