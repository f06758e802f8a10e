// Command demo shows nodeready at work on a local control plane: nodes join one after
// another as an autoscaler adds them, each is held back by the startup taint until its agent
// has verified it, and every agent is gone once its node is released. It prints the nodes'
// progress live and a summary of the timings at the end. Then, as root on Linux, real nodes
// join a running cluster: one is released, one with a broken pod network is held until repaired.
// Each act ends with the fleet as `kubectl nodeready status` shows it.
//
// It runs the binaries that `make build plugin` builds (`make demo` does that first, and shows
// the agent's --dry-run on this machine), and builds the control plane with
// scripts/build-control-plane.sh, showing its progress, before the fleet.
// What real nodes run it builds itself with scripts/build-node.sh, beside the simulated fleet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// config is the demo's command line.
type config struct {
	nodes    int
	interval time.Duration
	deadline time.Duration
	keepLogs bool
	// karpenter: the real Karpenter launches the nodes, for pending pods.
	karpenter bool
	// realNode: after the simulated nodes, real nodes joining a running cluster when the
	// machine allows it.
	realNode bool
	// plugin is the built kubectl plugin each act ends with (findPlugin).
	plugin string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.nodes, "nodes", 6, "number of nodes to add")
	flag.DurationVar(&cfg.interval, "interval", time.Second, "time between two nodes joining")
	flag.DurationVar(&cfg.deadline, "deadline", time.Minute, "fail if a node is not verified and rid of its agent this long after it was created")
	flag.BoolVar(&cfg.keepLogs, "keep-logs", false, "keep the agent, kubelet and control plane logs and print where they are")
	flag.BoolVar(&cfg.realNode, "real-node", true, "then real nodes joining a running cluster, one of them with a broken pod network (kubelet, containerd, runc, flanneld; Linux and root; built in the background by scripts/build-node.sh)")
	flag.BoolVar(&cfg.karpenter, "karpenter", false, "let the real Karpenter (kwok provider, built by make karpenter) launch the nodes for -nodes pending pods, instead of adding them one every -interval")
	flag.Parse()
	if cfg.nodes < 1 || cfg.interval < 0 || cfg.deadline <= 0 {
		fmt.Fprintln(os.Stderr, "demo: -nodes must be at least 1, -interval not negative, -deadline positive")
		os.Exit(2)
	}

	plugin, err := findPlugin()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
	cfg.plugin = plugin

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends the demo at once; its processes die with it
	}()

	// The control plane first, as the fleet runs on it: compiled from source once per
	// machine, its progress shown as it goes; at once when it is built already.
	if root, err := harness.FindRepoRoot(); err == nil {
		fmt.Println("The control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), built from source once per machine:")
		if err := startScript(ctx, root, "build-control-plane").wait(ctx, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
			os.Exit(1)
		}
		fmt.Println()
	}

	// What real nodes run builds beside the simulated fleet: the fleet shows as soon as the
	// control plane is built, and the build is done or shown progressing when the fleet is.
	var build *scriptBuild
	if cfg.realNode && realNodesSupported() == "" {
		if root, err := harness.FindRepoRoot(); err == nil {
			build = startNodeBuild(ctx, root)
		}
	}
	err = run(ctx, cfg, newScreen(os.Stdout))
	if err == nil && ctx.Err() == nil && cfg.realNode {
		agent, _, _ := findBinaries() // run found them
		if build == nil {
			build = &scriptBuild{start: time.Now(), done: make(chan struct{}), err: errors.New("the repository root was not found")}
			close(build.done)
		}
		err = realNodes(ctx, os.Stdout, agent, cfg.plugin, build)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "demo: interrupted; stopped the agents, the kubelet and the control plane")
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
}

// screen is where the demo writes, and whether that is a terminal.
type screen struct {
	*os.File
	tty bool
}

func newScreen(f *os.File) screen {
	return screen{File: f, tty: term.IsTerminal(int(f.Fd()))}
}

// size returns the terminal's width and height, 80x24 when unknown.
func (s screen) size() (width, height int) {
	w, h, err := term.GetSize(int(s.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24
	}
	return w, h
}

// findPlugin returns the kubectl plugin the demo ends with, as a user runs it.
func findPlugin() (string, error) {
	plugin := os.Getenv(harness.PluginBinaryEnv)
	if plugin == "" {
		root, err := harness.FindRepoRoot()
		if err != nil {
			return "", fmt.Errorf("%w; run the demo from the repository, or set %s", err, harness.PluginBinaryEnv)
		}
		plugin = filepath.Join(root, "bin", "kubectl-nodeready")
	}
	if _, err := os.Stat(plugin); err != nil {
		return "", fmt.Errorf("kubectl plugin %s: not built yet; run `make plugin` in the repository root first, or just `make demo`", plugin)
	}
	return plugin, nil
}

// showStatus ends an act of the demo with the fleet as `kubectl nodeready status` shows it:
// the built plugin, run with the cluster's kubeconfig.
func showStatus(ctx context.Context, out io.Writer, plugin, kubeconfig string) error {
	fmt.Fprint(out, "\nThe fleet as nodeready sees it:\n\n$ kubectl nodeready status\n")
	cmd := exec.CommandContext(ctx, plugin, "--kubeconfig", kubeconfig, "status")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl nodeready status: %w", err)
	}
	return nil
}

// errMissing is a binary the demo needs that is not built yet.
var errMissing = errors.New("not built yet; run `make build control-plane` in the repository root first (the control plane takes a few minutes to build, once), or just `make demo`")

// findBinaries returns the agent binary and the control plane's binary directory, or what
// to build.
func findBinaries() (agent, binDir string, err error) {
	binDir, err = controlplane.DefaultBinDir()
	if err != nil {
		return "", "", err
	}
	agent = os.Getenv(harness.AgentBinaryEnv)
	if agent == "" {
		root, err := harness.FindRepoRoot()
		if err != nil {
			return "", "", fmt.Errorf("%w; run the demo from the repository, or set %s", err, harness.AgentBinaryEnv)
		}
		agent = filepath.Join(root, "bin", "nodeready")
	}
	if _, err := os.Stat(agent); err != nil {
		return "", "", fmt.Errorf("agent binary %s: %w", agent, errMissing)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return "", "", fmt.Errorf("control plane binary %s: %w", filepath.Join(binDir, name), errMissing)
		}
	}
	return agent, binDir, nil
}
