package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/process"
)

// Nodes is a set of real nodes on this machine, each in namespaces of its own as a single
// node is, joined by a bridge inside an underlay network namespace: the host reaches it over
// one veth pair (hostLink, HostAddress/24), node i is nodeAddress(i) on it. Pods get a /24 of
// ClusterCIDR from kube-controller-manager (controlplane.Options.ClusterCIDR) and flanneld
// (VXLAN, in each node's namespace) routes between the nodes. The set holds the machine-wide
// lock from PrepareNodes to Stop, and puts the machine back as a single node does.
//
// A dual-stack set gives each node an IPv6 address too (nodeAddress6(i)), pods an address of
// ClusterCIDRv6 beside their IPv4 one, and flanneld a second VXLAN device for IPv6.
type Nodes struct {
	Nodes       []*Node
	dualStack   bool
	lock        *os.File
	before      string
	after       string
	underlay    *process.Process
	underlayPid int
}

// FlannelBinEnv says where scripts/build-node.sh put flanneld; else the newest .cache/flannel/*/bin.
const FlannelBinEnv = "NODEREADY_FLANNEL_BIN"

// PrepareNodes cleans what a killed run left, then creates the underlay and one node per
// options (their Name, Taints and LogDir; node i is the i-th). The control plane can bind
// HostAddress once it returns; each node's Start starts its daemons and flanneld. dualStack
// makes the set dual-stack: its control plane must then allocate both families
// (ClusterCIDRv6, ServiceCIDRv6; StartCluster does).
func PrepareNodes(opts []Options, dualStack bool) (*Nodes, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("real nodes need root")
	}
	if len(opts) == 0 || len(opts) > 250 {
		return nil, fmt.Errorf("%d real nodes: want 1 to 250", len(opts))
	}
	if _, err := flannelBinary(); err != nil {
		return nil, err
	}
	lock, err := lockCleanMachine()
	if err != nil {
		return nil, err
	}
	s := &Nodes{lock: lock, before: MachineState(), dualStack: dualStack}
	if err := s.prepare(opts); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Nodes) prepare(opts []Options) error {
	const underlayCgroup = CgroupRoot + "/underlay"
	if err := createCgroups(underlayCgroup); err != nil {
		return err
	}
	for _, o := range opts {
		if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
			return err
		}
	}
	logDir := opts[0].LogDir
	ready := filepath.Join(os.TempDir(), fmt.Sprintf("nodeready-underlay-%d", os.Getpid()))
	defer os.Remove(ready)
	u, err := holdNamespaces("underlay", logDir, underlayCgroup, ready, "", "--net")
	if u != nil {
		s.underlay, s.underlayPid = u, u.Cmd.Process.Pid
	}
	if err != nil {
		return fmt.Errorf("underlay namespace: %w", err)
	}
	if err := setupUnderlay(s.underlayPid); err != nil {
		return err
	}
	for i, o := range opts {
		dir, err := os.MkdirTemp("", "nodeready-realnode-")
		if err != nil {
			return err
		}
		n := &Node{opts: o, dir: dir, index: i, address: nodeAddress(i), cgroup: nodeCgroup(i), set: s, flanneld: true}
		if s.dualStack {
			n.address6 = nodeAddress6(i)
		}
		s.Nodes = append(s.Nodes, n)
		if err := n.prepare(); err != nil {
			return fmt.Errorf("node %s: %w", o.Name, err)
		}
	}
	return nil
}

// Stop stops every node, then puts back the machine: cgroups, the host's link (the underlay
// and everything in it end with its namespace), the kernel settings, the lock.
func (s *Nodes) Stop() error {
	var errs []error
	for i := len(s.Nodes) - 1; i >= 0; i-- {
		if err := s.Nodes[i].Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", s.Nodes[i].opts.Name, err))
		}
	}
	if s.underlay != nil {
		s.underlay.Stop(time.Second, nil)
	}
	errs = append(errs, cleanCgroups(CgroupRoot))
	teardownNetwork()
	errs = append(errs, restoreTunables())
	// Read while the lock is held: once it is released, the next real node may start.
	s.after = MachineState()
	if s.lock != nil {
		s.lock.Close()
	}
	return errors.Join(errs...)
}

// MachineBefore is the machine's state when PrepareNodes began, after it cleaned what a
// killed run left: what Stop must leave.
func (s *Nodes) MachineBefore() string { return s.before }

// MachineAfter is the machine's state when Stop had put it back, read before it released the
// lock (after that another real node may run): it should equal MachineBefore.
func (s *Nodes) MachineAfter() string { return s.after }

func flannelBinary() (string, error) {
	dir, err := cached(FlannelBinEnv, "flannel")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "flanneld")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("flanneld: %w; build it with scripts/build-node.sh", err)
	}
	return bin, nil
}

// flannelUser is flanneld's identity, bound to flannelRole.
const flannelUser, flannelRole = "nodeready:flannel", "nodeready:flannel"

// ensureFlannelRBAC grants flanneld what kube-flannel's ClusterRole does, minus the pods it
// reads only to find its own node (NODE_NAME says it here).
func ensureFlannelRBAC(ctx context.Context, cp *controlplane.ControlPlane) error {
	rbac := cp.Client().RbacV1()
	_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: flannelRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("flannel RBAC: %w", err)
	}
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: flannelRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: flannelRole},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: flannelUser, APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("flannel RBAC: %w", err)
	}
	return nil
}

// startFlannel runs flanneld in the node's namespaces (its iptables rules, flannel.1 and the
// routes to the other nodes' subnets live and die there), waits for its subnet.env, which it
// writes once kube-controller-manager gave the Node a pod CIDR, and writes the CNI
// configuration from it: until then the kubelet reports the network not ready.
func (n *Node) startFlannel(ctx context.Context, cp *controlplane.ControlPlane, path string) error {
	bin, err := flannelBinary()
	if err != nil {
		return err
	}
	if err := ensureFlannelRBAC(ctx, cp); err != nil {
		return err
	}
	// flanneld exits when the Node has no pod CIDR yet (kube-flannel's DaemonSet restarts it):
	// it starts once kube-controller-manager gave one.
	if err := waitFor(time.Minute, func() error {
		if ctx.Err() != nil {
			return backoffStop{ctx.Err()}
		}
		node, err := cp.Client().CoreV1().Nodes().Get(ctx, n.opts.Name, getOptions)
		if err == nil && node.Spec.PodCIDR == "" {
			err = errors.New("no spec.podCIDR")
		}
		return err
	}); err != nil {
		return fmt.Errorf("node %s pod CIDR: %w", n.opts.Name, err)
	}
	dir := filepath.Join(n.dir, "flannel")
	subnetEnv := filepath.Join(dir, "subnet.env")
	if err := writeFiles(map[string]string{filepath.Join(dir, "net-conf.json"): flannelNetConf(n.address6 != "")}); err != nil {
		return err
	}
	if err := cp.WriteClientKubeconfig(filepath.Join(dir, "kubeconfig"), flannelUser); err != nil {
		return err
	}
	f, err := start("flanneld", n.opts.LogDir, n.nsPid, n.cgroup, []string{path, "NODE_NAME=" + n.opts.Name},
		bin, "--kube-subnet-mgr", "--kubeconfig-file="+filepath.Join(dir, "kubeconfig"),
		"--iface=eth0", "--ip-masq", "--subnet-file="+subnetEnv, "--net-config-path="+filepath.Join(dir, "net-conf.json"))
	if err != nil {
		return err
	}
	n.daemons = append(n.daemons, f)
	var env []byte
	if err := waitFor(time.Minute, func() error {
		if err := f.ExitError(); err != nil {
			return backoffStop{err}
		}
		if ctx.Err() != nil {
			return backoffStop{ctx.Err()}
		}
		env, err = os.ReadFile(subnetEnv)
		return err
	}); err != nil {
		return fmt.Errorf("flanneld's subnet.env: %w", err)
	}
	conf, err := flannelCNIConfig(string(env))
	if err != nil {
		return err
	}
	return writeFiles(map[string]string{filepath.Join(n.dir, "containerd", "cni", "10-flannel.conflist"): conf})
}

// InNetns runs a command in the node's network namespace, such as an iptables rule that
// breaks its pod network; whatever it changes there ends with the node.
func (n *Node) InNetns(args ...string) error { return inNetns(n.nsPid, args...) }
