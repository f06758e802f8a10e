package realnode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/process"
)

// Options configures a node.
type Options struct {
	Name string
	// Taints the kubelet registers the node with (registerWithTaints), as "key=value:Effect".
	Taints []string
	// K8sBin holds kubelet and kube-proxy, ContainerdBin containerd, its shim and ctr
	// (scripts/build-node.sh). Empty: found by Binaries.
	K8sBin, ContainerdBin string
	// LogDir receives one log per daemon; it is kept.
	LogDir string
	// KubeletConfig is appended to the kubelet's configuration (KubeletConfiguration fields,
	// one per line), to measure a setting users may choose.
	KubeletConfig string
}

// Node is a running real node.
type Node struct {
	opts    Options
	lock    *os.File // held from Prepare to Stop: one real node per machine
	before  string   // MachineState once a killed run's leftovers are gone
	after   string   // MachineState when Stop had put the machine back, under the lock
	dir     string
	nsPid   int
	holder  *process.Process
	daemons []*process.Process // started in order, stopped in reverse

	// Where the node is: its InternalIP, its cgroup root. A single node (Prepare) has
	// NodeAddress and CgroupRoot; node i of a set (PrepareNodes) nodeAddress(i) and
	// nodeCgroup(i), and the set holds the lock, the underlay and the machine's cleanup.
	index    int
	address  string
	address6 string // of a dual-stack set; else empty
	cgroup   string
	set      *Nodes
	flanneld bool // the set's pod network: flanneld writes the CNI configuration's subnet

	kubeRouter *process.Process // of StartKubeRouter; also in daemons, stopped with the node
}

// Prepare cleans what a killed run left, then creates the node's cgroups, namespaces and
// network. The control plane can bind HostAddress once it returns; Start then starts the
// daemons. Stop undoes both.
func Prepare(opts Options) (*Node, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root")
	}
	lock, err := lockCleanMachine()
	if err != nil {
		return nil, err
	}
	before := MachineState()
	dir, err := os.MkdirTemp("", "nodeready-realnode-")
	if err != nil {
		lock.Close()
		return nil, err
	}
	n := &Node{opts: opts, lock: lock, before: before, dir: dir, address: NodeAddress, cgroup: CgroupRoot}
	if err := n.prepare(); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) prepare() error {
	if err := createCgroups(n.cgroup); err != nil {
		return err
	}
	// The holder keeps the namespaces alive: a network namespace and a mount namespace with
	// its own /run (containerd's state, /run/netns), /var/log (the kubelet's
	// /var/log/containers) and /var/lib (the CNI plugins' /var/lib/cni, the kubelet's
	// /var/lib/kubelet), so none of their mounts and files reaches the host.
	ready := filepath.Join(n.dir, "namespaces-ready")
	holder, err := holdNamespaces("namespaces", n.opts.LogDir, n.cgroup, ready,
		"for d in /run /var/log /var/lib; do mount -t tmpfs -o mode=0755 nodeready $d || exit 1; done",
		"--net", "--mount", "--propagation", "private")
	if holder != nil {
		n.holder, n.nsPid = holder, holder.Cmd.Process.Pid
	}
	if err != nil {
		return fmt.Errorf("node namespaces: %w", err)
	}
	if n.set != nil {
		return joinUnderlay(n.set.underlayPid, n.nsPid, n.index, n.address6 != "")
	}
	return setupNetwork(n.nsPid)
}

// Start starts containerd, the kubelet and kube-proxy against cp, and returns once the
// kubelet has registered the Node.
// Images come from registry (host:port, plain HTTP); sandboxImage is the pause image there.
func (n *Node) Start(ctx context.Context, cp *controlplane.ControlPlane, registry, sandboxImage string) error {
	k8sBin, ctrdBin, err := Binaries(n.opts.K8sBin, n.opts.ContainerdBin)
	if err != nil {
		return err
	}
	ctrd := filepath.Join(n.dir, "containerd")
	kubelet := filepath.Join(n.dir, "kubelet")
	proxy := filepath.Join(n.dir, "kube-proxy")
	files := map[string]string{
		filepath.Join(ctrd, "config.toml"):                     containerdConfig(ctrd, registry, sandboxImage),
		filepath.Join(ctrd, "certs.d", registry, "hosts.toml"): registryHosts(registry),
		filepath.Join(kubelet, "config.yaml"):                  kubeletConfig(kubelet, cp.CAFile(), socketPath(ctrd), n.cgroup, n.address, n.opts.Taints) + n.opts.KubeletConfig,
		filepath.Join(kubelet, "resolv.conf"):                  "",
		filepath.Join(proxy, "config.yaml"):                    kubeProxyConfig(filepath.Join(proxy, "kubeconfig"), n.opts.Name, n.address, n.clusterCIDRs()),
	}
	if !n.flanneld {
		files[filepath.Join(ctrd, "cni", "10-nodeready.conflist")] = cniConfig
	} else {
		// Written by startFlannel from flanneld's subnet.env; containerd watches the directory.
		if err := os.MkdirAll(filepath.Join(ctrd, "cni"), 0o755); err != nil {
			return err
		}
	}
	if err := writeFiles(files); err != nil {
		return fmt.Errorf("write node configuration: %w", err)
	}
	if err := cp.WriteClientKubeconfig(filepath.Join(kubelet, "kubeconfig"), "system:node:"+n.opts.Name, "system:nodes"); err != nil {
		return err
	}
	if err := cp.WriteClientKubeconfig(filepath.Join(proxy, "kubeconfig"), "system:kube-proxy"); err != nil {
		return err
	}

	path := "PATH=" + ctrdBin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	c, err := start("containerd", n.opts.LogDir, n.nsPid, n.cgroup, []string{path},
		filepath.Join(ctrdBin, "containerd"), "--config", filepath.Join(ctrd, "config.toml"), "--log-level", "info")
	if err != nil {
		return err
	}
	n.daemons = append(n.daemons, c)
	if err := waitFor(30*time.Second, func() error {
		if err := c.ExitError(); err != nil {
			return backoffStop{err}
		}
		_, err := os.Stat(socketPath(ctrd))
		return err
	}); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}

	if err := saveTunables(); err != nil {
		return err
	}
	k, err := start("kubelet", n.opts.LogDir, n.nsPid, n.cgroup, []string{path},
		filepath.Join(k8sBin, "kubelet"),
		"--config="+filepath.Join(kubelet, "config.yaml"),
		"--kubeconfig="+filepath.Join(kubelet, "kubeconfig"),
		"--root-dir="+filepath.Join(kubelet, "root"),
		"--cert-dir="+filepath.Join(kubelet, "pki"),
		"--hostname-override="+n.opts.Name,
		"--node-ip="+n.nodeIPs(),
		"--v=2")
	if err != nil {
		return err
	}
	n.daemons = append(n.daemons, k)

	p, err := start("kube-proxy", n.opts.LogDir, n.nsPid, n.cgroup, []string{path},
		filepath.Join(k8sBin, "kube-proxy"), "--config="+filepath.Join(proxy, "config.yaml"), "--v=2")
	if err != nil {
		return err
	}
	n.daemons = append(n.daemons, p)

	if err := waitFor(2*time.Minute, func() error {
		for _, d := range n.daemons {
			if err := d.ExitError(); err != nil {
				return backoffStop{err}
			}
		}
		if ctx.Err() != nil {
			return backoffStop{ctx.Err()}
		}
		_, err := cp.Client().CoreV1().Nodes().Get(ctx, n.opts.Name, getOptions)
		return err
	}); err != nil {
		return err
	}
	if n.flanneld {
		return n.startFlannel(ctx, cp, path)
	}
	return nil
}

// StartPlugin runs a node plugin beside the kubelet, as its DaemonSet would: argv with
// -kubeconfig (the kubelet's, the node's identity), -kubelet-root and -node added, in the
// node's namespaces and the daemons' cgroup, logging to <LogDir>/<name>.log. It stops with
// the node.
func (n *Node) StartPlugin(name string, argv ...string) error {
	argv = append(argv, "-kubeconfig="+filepath.Join(n.dir, "kubelet", "kubeconfig"), "-kubelet-root="+n.KubeletRoot(), "-node="+n.opts.Name)
	p, err := start(name, n.opts.LogDir, n.nsPid, n.cgroup, nil, argv...)
	if err != nil {
		return err
	}
	n.daemons = append(n.daemons, p)
	return nil
}

// Exited reports a daemon that exited, or nil.
func (n *Node) Exited() error {
	for _, d := range n.daemons {
		if err := d.ExitError(); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops the daemons, kills whatever the node still runs (shims, containers), removes
// its cgroups, network and files. Mounts end with the node's mount namespace.
func (n *Node) Stop() error {
	for i := len(n.daemons) - 1; i >= 0; i-- {
		n.daemons[i].Stop(5*time.Second, nil)
	}
	if n.holder != nil {
		n.holder.Stop(time.Second, nil)
	}
	if n.set != nil {
		// The set puts back the machine: network, sysctls, lock.
		err := cleanCgroups(n.cgroup)
		if err == nil {
			err = os.RemoveAll(n.dir)
		}
		return err
	}
	errs := []error{cleanCgroups(CgroupRoot)}
	teardownNetwork()
	if err := restoreTunables(); err != nil {
		errs = append(errs, err)
	}
	if errs[0] == nil {
		errs = append(errs, os.RemoveAll(n.dir))
	}
	// Read while the lock is held: once it is released, the next real node may start.
	n.after = MachineState()
	if n.lock != nil {
		n.lock.Close()
	}
	return errors.Join(errs...)
}

// AddTaints adds taints ("key=value:Effect") that the kubelet registers the node with, as a
// node pool's taints: set before Start.
func (n *Node) AddTaints(taints ...string) { n.opts.Taints = append(n.opts.Taints, taints...) }

// Name is the Node's name.
func (n *Node) Name() string { return n.opts.Name }

// Address is the node's InternalIP.
func (n *Node) Address() string { return n.address }

// nodeIPs is the kubelet's --node-ip: the node's address, and of a dual-stack node its IPv6
// address second (IPv4 stays the primary family, as the control plane's ranges are).
func (n *Node) nodeIPs() string {
	if n.address6 == "" {
		return n.address
	}
	return n.address + "," + n.address6
}

// clusterCIDRs is the pod network kube-proxy tells apart from the rest: ClusterCIDR, and of a
// dual-stack node ClusterCIDRv6 too.
func (n *Node) clusterCIDRs() string {
	if n.address6 == "" {
		return ClusterCIDR
	}
	return ClusterCIDR + "," + ClusterCIDRv6
}

// PodPids returns the processes of the pod with uid on this node: its containers share the
// sandbox's network namespace, which a test enters through any of them.
func (n *Node) PodPids(uid string) []int {
	dirs, err := hierarchies()
	if err != nil {
		return nil
	}
	want := "pod" + uid
	for _, h := range dirs {
		if filepath.Base(h) != "pids" {
			continue
		}
		var out []int
		_ = filepath.WalkDir(filepath.Join(h, n.cgroup, "kubepods"), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() == want {
				out = append(out, pidsUnder(path)...)
				return filepath.SkipDir
			}
			return nil
		})
		return out
	}
	return nil
}

// workDirPattern matches the nodes' work directories (os.MkdirTemp's random digits), not the
// kept logs (nodeready-realnode-logs-*) nor the lock or the sysctls' record.
const workDirPattern = "nodeready-realnode-[0-9]*"

// removeWorkDirs removes the work directories a killed run left: under the lock, with the
// processes under CgroupRoot gone, none is in use.
func removeWorkDirs() error {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), workDirPattern))
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// MachineBefore is the machine's state when Prepare began, after it cleaned what a killed run
// left (which a test could not have put back): what Stop must leave.
func (n *Node) MachineBefore() string { return n.before }

// MachineAfter is the machine's state when Stop had put it back, read before Stop released the
// lock (after that another real node may run): it should equal MachineBefore.
func (n *Node) MachineAfter() string { return n.after }

// Dir is the node's work directory: configs, the kubelet's root, containerd's root.
func (n *Node) Dir() string { return n.dir }

// ContainerdSocket is containerd's address, for ctr -a.
func (n *Node) ContainerdSocket() string { return socketPath(filepath.Join(n.dir, "containerd")) }

// PodLogsDir is where the kubelet writes container logs: <namespace>_<pod>_<uid>/<container>/<restart>.log.
func (n *Node) PodLogsDir() string { return filepath.Join(n.dir, "kubelet", "pod-logs") }

// NsPid is the process holding the node's namespaces, for nsenter --target.
func (n *Node) NsPid() string { return strconv.Itoa(n.nsPid) }

// Processes returns the processes in the node's pods (below CgroupRoot) whose command line is
// argv0 alone, such as the agent's "/nodeready" (not its exec probes), for a test that kills
// one as the kernel's OOM killer would.
func (n *Node) Processes(argv0 string) []int {
	dirs, err := hierarchies()
	if err != nil {
		return nil
	}
	var out []int
	for _, h := range dirs {
		if filepath.Base(h) != "pids" {
			continue
		}
		for _, pid := range pidsUnder(filepath.Join(h, n.cgroup, "kubepods")) {
			cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			if err == nil && string(cmdline) == argv0+"\x00" {
				out = append(out, pid)
			}
		}
	}
	return out
}

// ReadFile reads the one file that pattern (a shell glob) names in the node's mount namespace,
// where the kubelet's volumes are mounted: a pod's projected ServiceAccount token, for one.
func (n *Node) ReadFile(pattern string) ([]byte, error) {
	out, err := exec.Command("nsenter", "--mount=/proc/"+strconv.Itoa(n.nsPid)+"/ns/mnt", "--", "sh", "-c", "cat "+pattern).Output()
	if err != nil {
		return nil, fmt.Errorf("read %s on the node: %w", pattern, err)
	}
	return out, nil
}

// KubeletRoot is the kubelet's --root-dir: pods/<uid>/volumes/... are there.
func (n *Node) KubeletRoot() string { return filepath.Join(n.dir, "kubelet", "root") }
