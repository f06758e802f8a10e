package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
)

const (
	fleetName = "demo"
	// refreshInterval is how often the view is brought up to date.
	refreshInterval = 200 * time.Millisecond
	// kubeletPollInterval is how often the kubelet's records are read: the precision of the
	// RUNNING times.
	kubeletPollInterval = 100 * time.Millisecond
)

// run is the demo from start to end. It stops everything it started before it returns.
func run(ctx context.Context, cfg config, out screen) (err error) {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	if cfg.karpenter {
		say("nodeready demo: a local control plane, the real Karpenter launching %d nodes for pending pods,", cfg.nodes)
	} else {
		say("nodeready demo: a local control plane, %d simulated nodes joining one every %s,", cfg.nodes, cfg.interval)
	}
	say("and the real nodeready agent verifying each of them.")
	say("")

	agent, binDir, err := findBinaries()
	if err != nil {
		return err
	}
	say("Agent binary:           %s", agent)
	say("Control plane binaries: %s", binDir)

	logDir, err := os.MkdirTemp("", "nodeready-demo-")
	if err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	defer func() {
		// Logs are kept when asked for, and after a failure.
		if cfg.keepLogs || (err != nil && ctx.Err() == nil) {
			fmt.Fprintf(out, "\nLogs kept in %s:\n  %s/  one log per agent process, and kubelet.log\n  controlplane/  etcd, kube-apiserver, kube-controller-manager, kube-scheduler\n",
				logDir, fleetName)
			return
		}
		os.RemoveAll(logDir)
	}()
	// client-go reports watch errors through klog; they go to a file, not over the view.
	clientLog, err := os.Create(filepath.Join(logDir, "client.log"))
	if err != nil {
		return fmt.Errorf("create client log: %w", err)
	}
	defer clientLog.Close()
	logClientTo(clientLog)

	c, err := startCluster(ctx, out, harness.Options{
		AgentBinary:  agent,
		LogDir:       logDir,
		ControlPlane: controlplane.Options{BinDir: binDir},
	})
	if err != nil {
		return err
	}
	defer c.Stop()
	settle := settleTime(ctx, c.Client())

	f, err := c.NewFleet(ctx, fleetName)
	if err != nil {
		return err
	}
	tr := newTracker()
	stopWatch, err := watchCluster(ctx, c.Client(), f, tr)
	if err != nil {
		return fmt.Errorf("watch nodes and pods: %w", err)
	}
	defer stopWatch()
	say("")
	say("Simulated kubelet running: it runs the agent binary for every agent pod.")
	add := func(ctx context.Context) error { return addNodes(ctx, f, tr, cfg.nodes, cfg.interval) }
	if cfg.karpenter {
		stopKarpenter, err := startKarpenter(ctx, out, c, f, tr)
		if err != nil {
			return err
		}
		defer stopKarpenter()
		add = func(ctx context.Context) error { return launch(ctx, c, cfg.nodes) }
	}
	introduceNodes(out, cfg)

	names, err := follow(ctx, cfg, out, f, tr, settle, add)
	if err != nil {
		if ctx.Err() == nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			say("\nFleet state:\n%s", f.Describe(dctx))
			cancel()
		}
		return err
	}
	// The harness's own checks: every node carries exactly the taints it was added with
	// besides the startup taint, and no agent pod is left in the API or the kubelet.
	if err := f.WaitReleased(ctx, names...); err != nil {
		return err
	}
	if err := f.WaitAgentsGone(ctx, names...); err != nil {
		return err
	}
	writeSummary(out, tr.Records(), settle)
	return showStatus(ctx, out, cfg.plugin, c.ControlPlane().Kubeconfig())
}

// startCluster starts the control plane and installs nodeready, saying what it does.
func startCluster(ctx context.Context, out screen, opts harness.Options) (*harness.Cluster, error) {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	say("")
	say("Starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler,")
	say("then installing nodeready with kubectl apply -f manifests/ ...")
	var installLog strings.Builder
	opts.Logf = func(format string, args ...any) {
		fmt.Fprintln(&installLog, strings.TrimSpace(fmt.Sprintf(format, args...)))
	}
	start := time.Now()
	done := showProgress(out, start)
	c, err := harness.Start(ctx, opts)
	done()
	if err != nil {
		return nil, fmt.Errorf("start the control plane and install nodeready: %w", err)
	}
	say("Control plane up at %s and nodeready installed, in %s:", c.ControlPlane().APIServerURL(), formatDuration(time.Since(start)))
	for _, l := range strings.Split(strings.TrimSpace(installLog.String()), "\n") {
		say("  %s", l)
	}
	return c, nil
}

// showProgress counts the seconds on the terminal while the control plane starts; on a
// pipe it shows nothing. The returned function stops it.
func showProgress(out screen, start time.Time) (done func()) {
	if !out.tty {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				io.WriteString(out, "\r\x1b[K")
				return
			case <-t.C:
				fmt.Fprintf(out, "\r\x1b[K  %s (the first start after a build takes longer)", formatDuration(time.Since(start)))
			}
		}
	})
	return func() {
		close(stop)
		wg.Wait()
	}
}

// settleTime returns the agents' SETTLE_TIME from the installed configuration, or the
// agent's default when it cannot be read.
func settleTime(ctx context.Context, client kubernetes.Interface) string {
	cm, err := client.CoreV1().ConfigMaps(harness.Namespace).Get(ctx, harness.ConfigMapName, metav1.GetOptions{})
	if err != nil || cm.Data["SETTLE_TIME"] == "" {
		return "5s"
	}
	return cm.Data["SETTLE_TIME"]
}

// logClientTo sends client-go's log (klog) to w instead of stderr.
func logClientTo(w io.Writer) {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	klog.SetOutput(w)
}
