package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
)

// KubeRouterBinEnv says where scripts/build-node.sh --kube-router put kube-router; else the
// newest .cache/kube-router/*/bin.
const KubeRouterBinEnv = "NODEREADY_KUBE_ROUTER_BIN"

// kubeRouterUser is kube-router's identity, bound to kubeRouterRole.
const kubeRouterUser, kubeRouterRole = "nodeready:kube-router", "nodeready:kube-router"

// KubeRouterBinary returns the path of the kube-router binary scripts/build-node.sh built.
func KubeRouterBinary() (string, error) {
	dir, err := cached(KubeRouterBinEnv, "kube-router")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "kube-router")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("kube-router: %w; build it with scripts/build-node.sh --kube-router", err)
	}
	return bin, nil
}

// ensureKubeRouterRBAC grants kube-router's firewall what it watches (pods, namespaces,
// nodes, NetworkPolicies, Services and their endpoints, which its informers list even with the
// proxy off) and the Events it records.
func ensureKubeRouterRBAC(ctx context.Context, cp *controlplane.ControlPlane) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: kubeRouterRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"", "networking.k8s.io", "discovery.k8s.io", "extensions"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	if _, err := cp.Client().RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-router RBAC: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: kubeRouterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: kubeRouterRole},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: kubeRouterUser, APIGroup: "rbac.authorization.k8s.io"}},
	}
	if _, err := cp.Client().RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-router RBAC: %w", err)
	}
	return nil
}

// StartKubeRouter runs kube-router with only its NetworkPolicy firewall on, in the node's
// namespaces beside flanneld, as its firewall DaemonSet does: its iptables chains and ipsets
// live and end in the node's network namespace, so nothing reaches the host. It returns
// once kube-router runs; it programs the policies on its own after that, as on a new node.
// A node runs it only when a test starts it: the other tests' clusters have no engine.
func (n *Node) StartKubeRouter(ctx context.Context, cp *controlplane.ControlPlane) error {
	if n.kubeRouter != nil && n.kubeRouter.ExitError() == nil {
		return errors.New("kube-router already runs")
	}
	bin, err := KubeRouterBinary()
	if err != nil {
		return err
	}
	if err := ensureKubeRouterRBAC(ctx, cp); err != nil {
		return err
	}
	dir := filepath.Join(n.dir, "kube-router")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteClientKubeconfig(kubeconfig, kubeRouterUser); err != nil {
		return err
	}
	// The router (BGP, the CNI configuration) and the service proxy stay off: flannel and
	// kube-proxy do their parts. The health port is the node's own (its network namespace).
	p, err := start("kube-router", n.opts.LogDir, n.nsPid, n.cgroup, nil,
		bin, "--kubeconfig="+kubeconfig, "--hostname-override="+n.opts.Name,
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
		"--enable-ipv6="+fmt.Sprint(n.address6 != ""))
	if err != nil {
		return err
	}
	n.kubeRouter = p
	n.daemons = append(n.daemons, p)
	// Running: its firewall's top-level chain exists in the node's network namespace (the
	// controller makes it before its first sync). A kube-router that cannot start (its
	// kubeconfig, its node) exits first.
	ns := "/proc/" + strconv.Itoa(n.nsPid) + "/ns/"
	return waitFor(30*time.Second, func() error {
		if err := p.ExitError(); err != nil {
			return backoffStop{err}
		}
		out, err := exec.Command("nsenter", "--net="+ns+"net", "--mount="+ns+"mnt", "--",
			"iptables", "-S", kubeRouterForwardChain).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kube-router's chain %s: %w: %s", kubeRouterForwardChain, err, out)
		}
		return nil
	})
}

// kubeRouterForwardChain is the top-level chain of kube-router's firewall
// (pkg/controllers/netpol, kubeForwardChainName).
const kubeRouterForwardChain = "KUBE-ROUTER-FORWARD"

// StopKubeRouter stops kube-router (SIGTERM, as its pod's deletion does). Its chains and
// ipsets stay in the node's network namespace as they are at exit.
func (n *Node) StopKubeRouter() {
	if n.kubeRouter != nil {
		n.kubeRouter.Stop(5*time.Second, nil)
	}
}
