package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	NodeName string // default "real-node"; of several nodes, NodeName-<i>
	// Nodes is how many real nodes (0: one, as a single node). More than one are a Nodes set:
	// joined by an underlay bridge, pod CIDRs from kube-controller-manager, flanneld.
	Nodes int
	// JoinedNodes of the nodes, the first ones, register without StartupTaint: nodes of a
	// running cluster, verified before. The others join with it.
	JoinedNodes int
	// KubeletConfig is appended to every node's kubelet configuration (Options.KubeletConfig).
	KubeletConfig string
	// DualStack makes a set of nodes dual-stack, IPv4 first: nodes, pods and Services get an
	// IPv6 address too (ClusterCIDRv6, ServiceCIDRv6), and the kube-dns Service is
	// RequireDualStack, so its EndpointSlices list the CoreDNS pods in both families.
	DualStack   bool
	AgentBinary string // the nodeready binary for the agent image: $NODEREADY_BIN or <repo>/bin/nodeready
	LogDir      string // kept; required
	Logf        func(format string, args ...any)
}

// Cluster is a control plane with one real node, the images in a registry on the host end of
// the node's link, and cluster DNS deployed.
type Cluster struct {
	CP       *controlplane.ControlPlane
	Node     *Node   // the first node
	Nodes    []*Node // every node, Node first
	Registry *Registry
	Images   Images
	NodeName string
	repo     string
	logf     func(format string, args ...any)
	set      *Nodes // of more than one node
}

// StartCluster prepares the node's namespaces and link, starts the registry with the images,
// the control plane on HostAddress and deploys CoreDNS. nodeready is not installed yet
// (Install does what a user does) and the node not started (StartNode).
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.NodeName == "" {
		opts.NodeName = "real-node"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	c := &Cluster{NodeName: opts.NodeName, logf: opts.Logf}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.repo, err = harness.FindRepoRoot(); err != nil {
		return nil, err
	}
	agent := opts.AgentBinary
	if agent == "" {
		agent = os.Getenv("NODEREADY_BIN")
	}
	if agent == "" {
		agent = filepath.Join(c.repo, "bin", "nodeready")
	}
	taints := func(i int) []string {
		if i < opts.JoinedNodes {
			return nil
		}
		return []string{wellknown.StartupTaintString}
	}
	cidr := ""
	if opts.Nodes > 1 {
		var nodes []Options
		for i := range opts.Nodes {
			name := fmt.Sprintf("%s-%d", opts.NodeName, i)
			nodes = append(nodes, Options{Name: name, Taints: taints(i), LogDir: filepath.Join(opts.LogDir, name), KubeletConfig: opts.KubeletConfig})
		}
		if c.set, err = PrepareNodes(nodes, opts.DualStack); err != nil {
			return nil, err
		}
		c.Nodes, c.Node, c.NodeName = c.set.Nodes, c.set.Nodes[0], c.set.Nodes[0].Name()
		cidr = ClusterCIDR
	} else {
		if opts.DualStack {
			return nil, errors.New("dual-stack needs a set of nodes (ClusterOptions.Nodes > 1)")
		}
		if c.Node, err = Prepare(Options{Name: opts.NodeName, Taints: taints(0), LogDir: opts.LogDir, KubeletConfig: opts.KubeletConfig}); err != nil {
			return nil, err
		}
		c.Nodes = []*Node{c.Node}
	}
	if c.Registry, err = StartRegistry(); err != nil {
		return nil, err
	}
	start := time.Now()
	if c.Images, err = PushImages(ctx, c.Registry, agent, c.Node.Dir()); err != nil {
		return nil, err
	}
	c.logf("Built and pushed the images in %s: %s (%d bytes), %s, %s", time.Since(start).Round(time.Millisecond),
		c.Images.Agent, c.Images.AgentSize, c.Images.Pause, c.Images.CoreDNS)
	cpOpts := controlplane.Options{
		LogDir:           filepath.Join(opts.LogDir, "controlplane"),
		APIServerAddress: HostAddress,
		ClusterCIDR:      cidr,
		// The API server reaches the kubelet (logs, exec) at its InternalIP, on the link.
		APIServerArgs: []string{"--kubelet-preferred-address-types=InternalIP"},
	}
	if opts.DualStack {
		cpOpts.ClusterCIDR += "," + ClusterCIDRv6
		cpOpts.APIServerArgs = append(cpOpts.APIServerArgs, "--service-cluster-ip-range="+serviceCIDR+","+ServiceCIDRv6)
	}
	if c.CP, err = controlplane.Start(ctx, cpOpts); err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	if err = DeployCoreDNS(ctx, c.CP.Client(), c.Images.CoreDNS, opts.DualStack); err != nil {
		return nil, err
	}
	return c, nil
}

// StartNodeAt starts node i as StartNode starts the first; of a set, its flanneld too, and it
// returns once the node's CNI configuration is written.
func (c *Cluster) StartNodeAt(ctx context.Context, i int) error {
	start := time.Now()
	if err := c.Nodes[i].Start(ctx, c.CP, c.Registry.Host, c.Images.Pause); err != nil {
		return fmt.Errorf("start real node %s: %w", c.Nodes[i].Name(), err)
	}
	c.logf("Started node %s (%s) in %s", c.Nodes[i].Name(), c.Nodes[i].Address(), time.Since(start).Round(time.Millisecond))
	return nil
}

// MachineBefore is the machine's state before the cluster's nodes, once a killed run's
// leftovers were removed: what Stop must leave.
func (c *Cluster) MachineBefore() string {
	if c.set != nil {
		return c.set.MachineBefore()
	}
	return c.Node.MachineBefore()
}

// MachineAfter is the machine's state once Stop put it back, read under the machine-wide lock.
func (c *Cluster) MachineAfter() string {
	if c.set != nil {
		return c.set.MachineAfter()
	}
	return c.Node.MachineAfter()
}

// StartNode starts the node's containerd, kubelet and kube-proxy; the kubelet registers the
// Node with wellknown.StartupTaintString, as a new node joins.
func (c *Cluster) StartNode(ctx context.Context) error {
	if err := c.Node.Start(ctx, c.CP, c.Registry.Host, c.Images.Pause); err != nil {
		return fmt.Errorf("start real node: %w", err)
	}
	return nil
}

// Install installs nodeready as the README says, `kubectl apply -f manifests/`, then points
// the DaemonSet at the image in the registry as `make deploy` does, pulled Always so every
// agent pod's pull is real.
func (c *Cluster) Install(ctx context.Context) error {
	out, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(c.repo, "manifests"))
	if err != nil {
		return err
	}
	c.logf("kubectl apply -f manifests/:\n%s", out)
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "set", "image", "daemonset/nodeready", "nodeready="+c.Images.Agent); err != nil {
		return err
	}
	_, err = c.Kubectl(ctx, "-n", "kube-system", "patch", "daemonset/nodeready", "--type=json",
		`-p=[{"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Always"}]`)
	return err
}

// Mirror makes every node's containerd pull the images of host (such as ghcr.io) from the
// test's registry, as a registry mirror does (containerd's hosts.toml, read at each pull): an
// image pushed there as repo is pulled as host/repo, by tag or by digest, and nothing leaves
// the machine.
func (c *Cluster) Mirror(host string) error {
	files := map[string]string{}
	for _, n := range c.Nodes {
		files[filepath.Join(n.Dir(), "containerd", "certs.d", host, "hosts.toml")] = mirrorHosts(host, c.Registry.Host)
	}
	return writeFiles(files)
}

// RepoFile is the path of a file of the repository, such as manifests/replace-node.
func (c *Cluster) RepoFile(elem ...string) string {
	return filepath.Join(append([]string{c.repo}, elem...)...)
}

// Kubectl runs kubectl as the cluster admin and returns its output; the error holds it too.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.CP.Kubectl(ctx, nil, args...)
}

// Stop stops the node (and puts back what it changed on the machine), the registry and the
// control plane.
func (c *Cluster) Stop() error {
	var err error
	if c.set != nil {
		err = c.set.Stop()
	} else if c.Node != nil {
		err = c.Node.Stop()
	}
	if c.Registry != nil {
		c.Registry.Stop()
	}
	if c.CP != nil {
		c.CP.Stop()
	}
	return err
}
