package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

const (
	// FleetLabel carries the fleet's name on each of its nodes. Fleets share the control
	// plane; this label and the node names keep their nodes apart.
	FleetLabel = "e2e.nodeready.io/fleet"
	// ForeignLabel, with ForeignLabelValue, is another owner's label on every fleet node; the
	// release must keep it.
	ForeignLabel      = "example.com/team"
	ForeignLabelValue = "infra"
)

// ForeignTaints are on every fleet node besides the startup taint and must survive the
// release: another owner's taint, and one with the startup taint's key but another effect,
// which to the API server is another taint and not nodeready's.
var ForeignTaints = []corev1.Taint{
	{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectPreferNoSchedule},
	{Key: wellknown.StartupTaint().Key, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule},
}

// dnsIP is what every node's DNS server answers for DNSName, the cluster IP of
// default/kubernetes in a default cluster.
var dnsIP = netip.MustParseAddr("10.96.0.1")

const (
	// PollInterval is how often the Wait methods look.
	PollInterval = 200 * time.Millisecond
	// WaitTimeout bounds each Wait method besides its ctx, and each node of one: generous for
	// a loaded two-core machine, short enough to fail with a clear error.
	WaitTimeout = 2 * time.Minute
	// stopTimeout bounds the removal of a fleet's nodes.
	stopTimeout = time.Minute
)

// NodeOptions describes one fleet node beyond what every fleet node has: the startup taint,
// ForeignTaints, FleetLabel and ForeignLabel.
type NodeOptions struct {
	// BrokenDNS starts the node's DNS server broken: NXDOMAIN for every name until
	// DNS(node).SetBroken(false).
	BrokenDNS bool
	// Labels are added to the node's labels; the release must keep them. They must not name
	// FleetLabel or ForeignLabel.
	Labels map[string]string
	// Taints are added to the node's taints; the release must keep them. The DaemonSet
	// tolerates every taint.
	Taints []corev1.Taint
	// Env, when not nil, is set as SetEnv does.
	Env map[string]string
	// Untainted registers the node without the startup taint, as a node that predates
	// nodeready's install: nodeready does not hold it.
	Untainted bool
	// Names are more names the node's DNS server answers, with DNSName's address: a
	// healthy node of a configuration whose DNS_TEST_DOMAINS name them.
	Names []string
}

// Fleet is a set of simulated nodes, each with its own node-local DNS server, and the
// kubelet that runs the agent pods bound to them. Its methods are safe for concurrent use.
type Fleet struct {
	c       *Cluster
	name    string
	logDir  string
	kubelet *kubelet.Kubelet
	history *History

	mu       sync.Mutex
	nodes    []string
	byName   map[string]*fleetNode
	env      map[string]map[string]string // node -> variables the node sets for its agents
	next     int                          // index of the next node AddNodes names
	stopped  bool
	stopOnce sync.Once
	stopErr  error
}

// fleetNode is what the fleet gave a node and expects back after the release.
type fleetNode struct {
	dns    *dnstest.Server
	labels map[string]string // must be there after the release
	taints []corev1.Taint    // exactly the node's taints after the release
	// adopted: created by someone else (Adopt), who also removes it.
	adopted bool
}

// NewFleet starts an empty fleet: a kubelet, running until ctx ends or Stop, and a History
// of the fleet's nodes. Its logs go to <LogDir>/<name>. The name, a DNS label, is the
// value of FleetLabel and the prefix of the names AddNodes gives; it must be unique among
// the cluster's running fleets.
func (c *Cluster) NewFleet(ctx context.Context, name string) (*Fleet, error) {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("fleet name %q: %s", name, strings.Join(errs, "; "))
	}
	f := &Fleet{
		c:      c,
		name:   name,
		logDir: filepath.Join(c.logDir, name),
		byName: map[string]*fleetNode{},
		env:    map[string]map[string]string{},
	}
	// The name is reserved (nil) while the fleet starts; Cluster.Stop skips it until then.
	c.mu.Lock()
	_, exists := c.fleets[name]
	if !exists {
		c.fleets[name] = nil
	}
	c.mu.Unlock()
	if exists {
		return nil, fmt.Errorf("fleet %s: already running", name)
	}
	err := f.start(ctx)
	c.mu.Lock()
	if err != nil {
		delete(c.fleets, name)
	} else {
		c.fleets[name] = f
	}
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("start fleet %s: %w", name, err)
	}
	return f, nil
}

func (f *Fleet) start(ctx context.Context) error {
	cp := f.c.cp
	host, port := cp.APIServerHostPort()
	k, err := kubelet.New(f.c.Client(), kubelet.Options{
		AgentBinary:   f.c.agent,
		APIServerURL:  cp.APIServerURL(),
		CAFile:        cp.CAFile(),
		APIServerHost: host,
		APIServerPort: port,
		LogDir:        f.logDir,
		NodeEnv:       f.nodeEnv,
		Version:       f.c.version,
	})
	if err != nil {
		return err
	}
	h, err := WatchNodes(ctx, f.c.Client(), FleetLabel+"="+f.name)
	if err != nil {
		k.Stop()
		return err
	}
	if err := k.Run(ctx); err != nil {
		h.Stop()
		k.Stop()
		return err
	}
	f.kubelet, f.history = k, h
	return nil
}

// Stop removes the fleet's nodes from the API (each as a terminated machine: its agents are
// killed and its pods, Lease and Node deleted), stops the kubelet, the DNS servers and the
// node watch, and frees the fleet's name. The logs stay. It returns the errors of the
// removals, and is idempotent.
func (f *Fleet) Stop() error { return f.shutdown(true) }

func (f *Fleet) shutdown(removeNodes bool) error {
	f.stopOnce.Do(func() {
		f.mu.Lock()
		f.stopped = true
		nodes := slices.Clone(f.nodes)
		f.mu.Unlock()

		var errs []error
		if removeNodes {
			ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			for _, n := range nodes {
				if f.adopted(n) {
					continue // its provisioner's to remove
				}
				if err := f.kubelet.RemoveNode(ctx, n); err != nil {
					errs = append(errs, err)
				}
			}
		}
		f.kubelet.Stop()
		f.history.Stop()
		f.mu.Lock()
		for _, n := range f.byName {
			n.dns.Close()
		}
		f.mu.Unlock()
		f.c.mu.Lock()
		if f.c.fleets[f.name] == f {
			delete(f.c.fleets, f.name)
		}
		f.c.mu.Unlock()
		f.stopErr = errors.Join(errs...)
	})
	return f.stopErr
}

// Name returns the fleet's name.
func (f *Fleet) Name() string { return f.name }

// LogDir returns the directory of the kubelet's log (kubelet.log) and of one log per agent
// process start (<namespace>_<pod>_<n>.log).
func (f *Fleet) LogDir() string { return f.logDir }

// AgentLogs returns what the fleet's agent processes wrote, every run of every agent pod, one
// log after the other, as the kubelet kept it in LogDir.
func (f *Fleet) AgentLogs() (string, error) {
	files, err := filepath.Glob(filepath.Join(f.logDir, Namespace+"_"+DaemonSetName+"-*.log"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

// Kubelet returns the simulated kubelet of the fleet's nodes: what it ran, and how each
// process ended.
func (f *Fleet) Kubelet() *kubelet.Kubelet { return f.kubelet }

// History returns every version of the fleet's nodes since NewFleet, and their states.
func (f *Fleet) History() *History { return f.history }

// Nodes returns the names of the fleet's nodes, in the order they were added.
func (f *Fleet) Nodes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.nodes)
}

// DNS returns the node's DNS server, to break, heal or silence it; nil for a node the fleet
// does not have. The node's agents get its address as DNS_NAMESERVER.
func (f *Fleet) DNS(node string) *dnstest.Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.byName[node]; n != nil {
		return n.dns
	}
	return nil
}

// SetEnv sets the variables the node gives its agents, over the ConfigMap's, from their
// next process start on; nil removes them. The node need not be added yet. DNS_NAMESERVER
// is always the node's DNS server.
func (f *Fleet) SetEnv(node string, env map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.env[node] = maps.Clone(env)
}

// nodeEnv is the kubelet's NodeEnv: the node's DNS server as a node-local DNS cache, and
// whatever SetEnv put there.
func (f *Fleet) nodeEnv(node string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	env := maps.Clone(f.env[node])
	if env == nil {
		env = map[string]string{}
	}
	if n := f.byName[node]; n != nil {
		env["DNS_NAMESERVER"] = n.dns.Addr()
	}
	return env
}

// AddNode starts the node's DNS server and registers the node as Karpenter would: Ready,
// with the startup taint, and with foreign taints and labels that must survive the release
// (ForeignTaints, ForeignLabel, and those of o). The DaemonSet then gives it an agent pod,
// which the fleet's kubelet runs.
func (f *Fleet) AddNode(ctx context.Context, name string, o NodeOptions) error {
	for _, k := range []string{FleetLabel, ForeignLabel} {
		if _, ok := o.Labels[k]; ok {
			return fmt.Errorf("add node %s: label %s is the fleet's", name, k)
		}
	}
	labels := map[string]string{FleetLabel: f.name, ForeignLabel: ForeignLabelValue}
	maps.Copy(labels, o.Labels)
	taints := append(slices.Clone(ForeignTaints), o.Taints...)

	records := map[string][]netip.Addr{DNSName: {dnsIP}}
	for _, n := range o.Names {
		records[n] = []netip.Addr{dnsIP}
	}
	dns, err := dnstest.NewServer(records)
	if err != nil {
		return fmt.Errorf("add node %s: %w", name, err)
	}
	dns.SetBroken(o.BrokenDNS)

	f.mu.Lock()
	switch {
	case f.stopped:
		err = fmt.Errorf("add node %s: fleet %s stopped", name, f.name)
	case f.byName[name] != nil:
		err = fmt.Errorf("add node %s: already in fleet %s", name, f.name)
	default:
		f.byName[name] = &fleetNode{dns: dns, labels: labels, taints: taints}
		f.nodes = append(f.nodes, name)
		if o.Env != nil {
			f.env[name] = maps.Clone(o.Env)
		}
	}
	f.mu.Unlock()
	if err != nil {
		dns.Close()
		return err
	}

	registered := append([]corev1.Taint{wellknown.StartupTaint()}, taints...)
	if o.Untainted {
		registered = slices.Clone(taints)
	}
	err = f.kubelet.AddNode(ctx, name, kubelet.NodeOptions{
		Labels: maps.Clone(labels),
		Taints: registered,
	})
	if err != nil {
		f.mu.Lock()
		delete(f.byName, name)
		f.nodes = slices.DeleteFunc(f.nodes, func(n string) bool { return n == name })
		f.mu.Unlock()
		dns.Close()
		return err
	}
	return nil
}

// Adopt makes the fleet's kubelet the kubelet of every node that someone else creates with
// the fleet's label and the label key provisioned, such as Karpenter's karpenter.sh/nodepool
// in a NodePool whose template carries FleetLabel: see kubelet.Kubelet.Adopt. Each node gets
// its DNS server and environment from options(node) as it is adopted; of NodeOptions, only
// BrokenDNS, Env and Taints (the taints the node keeps after its release) apply. The labels
// a node is created with must still be there after its release (WaitReleased).
func (f *Fleet) Adopt(ctx context.Context, provisioned string, options func(*corev1.Node) NodeOptions) error {
	selector := FleetLabel + "=" + f.name + "," + provisioned
	return f.kubelet.Adopt(ctx, selector, func(n *corev1.Node) error {
		o := options(n)
		dns, err := dnstest.NewServer(map[string][]netip.Addr{DNSName: {dnsIP}})
		if err != nil {
			return err
		}
		dns.SetBroken(o.BrokenDNS)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.stopped || f.byName[n.Name] != nil {
			dns.Close()
			return nil
		}
		f.byName[n.Name] = &fleetNode{dns: dns, labels: maps.Clone(n.Labels), taints: slices.Clone(o.Taints), adopted: true}
		f.nodes = append(f.nodes, n.Name)
		if o.Env != nil {
			f.env[n.Name] = maps.Clone(o.Env)
		}
		return nil
	})
}

// AddNodes adds n nodes named <fleet>-<i>, i counting up across calls, one after another
// with the same options, and returns the names of those it added.
func (f *Fleet) AddNodes(ctx context.Context, n int, o NodeOptions) ([]string, error) {
	f.mu.Lock()
	first := f.next
	f.next += n
	f.mu.Unlock()
	names := make([]string, 0, n)
	for i := range n {
		name := fmt.Sprintf("%s-%d", f.name, first+i)
		if err := f.AddNode(ctx, name, o); err != nil {
			return names, err
		}
		names = append(names, name)
	}
	return names, nil
}

func (f *Fleet) adopted(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byName[name] != nil && f.byName[name].adopted
}

func (f *Fleet) node(name string) (*fleetNode, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.byName[name]
	if n == nil {
		return nil, fmt.Errorf("node %s: not in fleet %s", name, f.name)
	}
	return n, nil
}

// poll calls cond every PollInterval until it is done, ctx ends or WaitTimeout passes.
func poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, PollInterval, WaitTimeout, true, cond)
}

// WaitReleased waits until every node carries the verified label (as verified or failed open)
// and exactly the taints it
// was added with besides the startup taint: the startup taint gone, and the node lifecycle
// controller's not-ready taint from registration gone too. A released node that lost a
// label the fleet gave it is an error.
func (f *Fleet) WaitReleased(ctx context.Context, nodes ...string) error {
	for _, name := range nodes {
		want, err := f.node(name)
		if err != nil {
			return err
		}
		var last *corev1.Node
		err = poll(ctx, func(ctx context.Context) (bool, error) {
			n, err := f.c.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil // the API server may be restarting
			}
			last = n
			return IsReleased(n) && sameTaints(want.taints, n.Spec.Taints), nil
		})
		if err != nil {
			return fmt.Errorf("node %s not released; last seen labels %v, taints %v: %w", name, labelsOf(last), taintsOf(last), err)
		}
		for k, v := range want.labels {
			if last.Labels[k] != v {
				return fmt.Errorf("node %s released without its label %s=%s; labels %v", name, k, v, last.Labels)
			}
		}
	}
	return nil
}

// WaitAgentsGone waits until no agent pod is bound to the nodes in the API and the kubelet
// is finished with every pod it ran there.
func (f *Fleet) WaitAgentsGone(ctx context.Context, nodes ...string) error {
	for _, name := range nodes {
		var left []string
		err := poll(ctx, func(ctx context.Context) (bool, error) {
			pods, err := f.AgentPods(ctx, name)
			if err != nil {
				return false, nil
			}
			left = left[:0]
			for _, p := range pods {
				left = append(left, p.Name)
			}
			for _, p := range f.PodsOn(name) {
				if !p.Done {
					left = append(left, "kubelet:"+p.Name)
				}
			}
			return len(left) == 0, nil
		})
		if err != nil {
			return fmt.Errorf("agent pods left on %s: %v: %w", name, left, err)
		}
	}
	return nil
}

// WaitAgentStarted waits until the kubelet has started an agent process on the node; the
// process may have finished already.
func (f *Fleet) WaitAgentStarted(ctx context.Context, node string) error {
	err := poll(ctx, func(context.Context) (bool, error) {
		for _, p := range f.PodsOn(node) {
			if p.Running || len(p.Exits) > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no agent started on %s: %w", node, err)
	}
	return nil
}

// WaitAgentRunning waits until an agent process runs on the node and returns its pod.
func (f *Fleet) WaitAgentRunning(ctx context.Context, node string) (kubelet.PodInfo, error) {
	var pod kubelet.PodInfo
	err := poll(ctx, func(context.Context) (bool, error) {
		for _, p := range f.PodsOn(node) {
			if p.Running {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return kubelet.PodInfo{}, fmt.Errorf("no agent running on %s: %w", node, err)
	}
	return pod, nil
}

// WaitMetric waits until the running agent of the pod reports metric >= min on /metrics
// (see Scrape). It fails at once when the pod's agent is not running.
func (f *Fleet) WaitMetric(ctx context.Context, pod kubelet.PodInfo, metric string, min float64) error {
	var last float64
	var lastErr error
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		p, ok := f.kubelet.Pod(pod.UID)
		if !ok || !p.Running {
			return false, fmt.Errorf("agent of pod %s is not running", pod.Name)
		}
		last, lastErr = Scrape(ctx, p.MetricsAddr, metric)
		return lastErr == nil && last >= min, nil
	})
	if err != nil {
		return fmt.Errorf("%s of pod %s: last %v (%v), want >= %v: %w", metric, pod.Name, last, lastErr, min, err)
	}
	return nil
}

// PodsOn returns the pods the kubelet ran on the node, in no particular order.
func (f *Fleet) PodsOn(node string) []kubelet.PodInfo {
	var on []kubelet.PodInfo
	for _, p := range f.kubelet.Pods() {
		if p.Node == node {
			on = append(on, p)
		}
	}
	return on
}

// AgentPods returns the agent pods bound to the node in the API.
func (f *Fleet) AgentPods(ctx context.Context, node string) ([]corev1.Pod, error) {
	pods, err := f.c.Client().CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: AgentSelector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list agent pods on %s: %w", node, err)
	}
	return pods.Items, nil
}

// Describe returns the fleet's nodes (labels, taints, history) and the kubelet's pods, one
// per line: what a person wants to see after a failure. Pods that ended cleanly (exit 0 on
// the SIGTERM, no restart) are counted, not listed, so a CI log's tail keeps what went wrong.
func (f *Fleet) Describe(ctx context.Context) string {
	var b strings.Builder
	for _, name := range f.Nodes() {
		n, err := f.c.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(&b, "node %s: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "node %s: labels %v taints %v history %v\n", name, labelsOf(n), taintsOf(n), f.history.States(name))
	}
	clean := 0
	for _, p := range f.kubelet.Pods() {
		if p.Done && p.Restarts == 0 && len(p.Exits) == 1 && p.Exits[0].Code == 0 && p.Exits[0].Signaled && !p.Exits[0].Killed {
			clean++
			continue
		}
		fmt.Fprintf(&b, "pod %s/%s on %s: running=%v done=%v restarts=%d exits=%+v\n", p.Namespace, p.Name, p.Node, p.Running, p.Done, p.Restarts, p.Exits)
	}
	fmt.Fprintf(&b, "%d more pods ended cleanly (exit 0 on the SIGTERM)\n", clean)
	return b.String()
}

// removeLogs removes the fleet's log directory.
func (f *Fleet) removeLogs() { os.RemoveAll(f.logDir) }

// sameTaints reports whether got holds exactly the taints of want, in any order.
func sameTaints(want, got []corev1.Taint) bool {
	return len(want) == len(got) && hasTaints(got, want)
}

// hasTaints reports whether got holds every taint of want, value included.
func hasTaints(got, want []corev1.Taint) bool {
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g corev1.Taint) bool { return g.MatchTaint(&w) && g.Value == w.Value }) {
			return false
		}
	}
	return true
}

func labelsOf(n *corev1.Node) map[string]string {
	if n == nil {
		return nil
	}
	return n.Labels
}

func taintsOf(n *corev1.Node) []string {
	if n == nil {
		return nil
	}
	var s []string
	for _, t := range n.Spec.Taints {
		s = append(s, t.ToString())
	}
	return s
}

// PodNode is the node a DaemonSet pod is for: its nodeName once bound, else the node its
// required affinity names (the DaemonSet controller sets matchFields metadata.name), so also
// while the pod waits to be scheduled.
func PodNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}
