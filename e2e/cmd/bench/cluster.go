package main

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// dnsAnswer is what the agents' DNS server answers for harness.DNSName: the kube-dns
// Service address of a default cluster. The dns check only needs an answer.
var dnsAnswer = netip.MustParseAddr("10.96.0.10")

// shippedSettings are put back to their values in manifests/02-configmap.yaml over the
// harness's loopback configuration, which shortens them for tests: the agents then log and
// retry as they do in production (debug logging writes a line per check; short check
// timeouts and back-offs multiply the requests of an overloaded API server).
var shippedSettings = []string{"LOG_LEVEL", "RETRY_BACKOFF_BASE", "RETRY_BACKOFF_MAX", "CHECK_TIMEOUT"}

// benchConfig returns the shipped values of shippedSettings.
func benchConfig(repo string) (map[string]string, error) {
	path := filepath.Join(repo, "manifests", "02-configmap.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(data, &cm); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	out := map[string]string{}
	for _, k := range shippedSettings {
		v, ok := cm.Data[k]
		if !ok {
			return nil, fmt.Errorf("%s has no %s", path, k)
		}
		out[k] = v
	}
	return out, nil
}

// startCluster starts a control plane with nodeready installed.
func startCluster(ctx context.Context, o options, name string, m *machine, logf func(string, ...any)) (*harness.Cluster, error) {
	config, err := benchConfig(o.repo)
	if err != nil {
		return nil, err
	}
	maps.Copy(config, o.set)
	opts := harness.Options{AgentBinary: o.agent, Config: config}
	if o.logDir != "" {
		opts.LogDir = filepath.Join(o.logDir, name)
		if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	c, err := harness.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if v, err := c.Client().Discovery().ServerVersion(); err == nil {
		m.Kubernetes = v.GitVersion
	}
	logf("%s: control plane up in %s", name, secs(time.Since(start)))
	return c, nil
}

// clusterBenchmarks runs the DaemonSet benchmark, then, with the DaemonSet removed so that
// only the benchmark's own agents run, the latency benchmark and the overhead and footprint
// benchmark.
func clusterBenchmarks(ctx context.Context, b *bench) []*section {
	o, m, logf := b.o, b.m, b.logf
	c, err := startCluster(ctx, o, "cluster", m, logf)
	if err != nil {
		return []*section{{Title: "daemonset, overhead", Err: err}}
	}
	defer c.Stop()
	var out []*section
	if slices.Contains(o.only, "daemonset") {
		logf("daemonset: %d nodes at once through the DaemonSet and the simulated kubelet", o.dsNodes)
		out = append(out, benchDaemonSet(ctx, c, o.dsNodes))
	}
	overhead, latency := slices.Contains(o.only, "overhead"), slices.Contains(o.only, "latency")
	if !overhead && !latency || ctx.Err() != nil {
		return out
	}
	env, err := prepareDirect(ctx, c)
	if err != nil {
		return append(out, &section{Title: "overhead", Err: err})
	}
	if latency {
		logf("latency: %d agent processes, one at a time, %s per round trip", o.latRuns, ms(roundTrip))
		out = append(out, benchLatency(ctx, c, env, o.agent, o.latRuns))
	}
	if !overhead || ctx.Err() != nil {
		return out
	}
	dns, err := dnstest.NewServer(map[string][]netip.Addr{harness.DNSName: {dnsAnswer}})
	if err != nil {
		return append(out, &section{Title: "overhead", Err: err})
	}
	defer dns.Close()
	env.dns = dns.Addr()
	logf("overhead: %d agent processes, one at a time", o.runs)
	s, fp := benchOverhead(ctx, c, env, o.agent, o.runs)
	return append(out, s, fp)
}

// prepareDirect removes the DaemonSet, so that the benchmark runs the only agents, and
// returns the environment every agent gets: the installed configuration and the memory
// limit the DaemonSet gives GOMEMLIMIT.
func prepareDirect(ctx context.Context, c *harness.Cluster) (agentEnv, error) {
	var env agentEnv
	ds, err := c.Client().AppsV1().DaemonSets(harness.Namespace).Get(ctx, harness.DaemonSetName, metav1.GetOptions{})
	if err != nil {
		return env, fmt.Errorf("read DaemonSet: %w", err)
	}
	if lim, ok := ds.Spec.Template.Spec.Containers[0].Resources.Limits["memory"]; ok {
		env.goMemLimit = fmt.Sprint(lim.Value())
	}
	if err := removeDaemonSet(ctx, c); err != nil {
		return env, err
	}
	cm, err := c.Client().CoreV1().ConfigMaps(harness.Namespace).Get(ctx, harness.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return env, fmt.Errorf("read %s: %w", harness.ConfigMapName, err)
	}
	env.config = cm.Data
	env.serviceHost, env.servicePort = c.ControlPlane().APIServerHostPort()
	return env, nil
}

// removeDaemonSet deletes the DaemonSet and waits until it is gone, with its pods.
func removeDaemonSet(ctx context.Context, c *harness.Cluster) error {
	client := c.Client()
	fg := metav1.DeletePropagationForeground
	err := client.AppsV1().DaemonSets(harness.Namespace).Delete(ctx, harness.DaemonSetName, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete DaemonSet: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.AppsV1().DaemonSets(harness.Namespace).Get(ctx, harness.DaemonSetName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// scaleVariant is how a scale run differs from nodeready as installed.
type scaleVariant struct {
	withoutPolicies bool // nodeready's admission policies deleted before the burst
	// pace: agents started a second, as the DaemonSet controller creates their pods
	// (-pace); 0 starts every agent at once, the worst case.
	pace float64
}

// scaleBenchmark runs one scale run on a control plane of its own, without the DaemonSet.
func scaleBenchmark(ctx context.Context, o options, m *machine, nodes int, settle time.Duration, logf func(string, ...any), v scaleVariant) (*section, *scaleResult) {
	name := fmt.Sprintf("scale-%d-settle-%s", nodes, settle)
	if v.withoutPolicies {
		name += "-without-policies"
	}
	if v.pace > 0 {
		name += fmt.Sprintf("-paced-%g", v.pace)
	}
	c, err := startCluster(ctx, o, name, m, logf)
	if err != nil {
		return &section{Title: name, Err: err}, nil
	}
	defer c.Stop()
	if err := removeDaemonSet(ctx, c); err != nil {
		return &section{Title: name, Err: err}, nil
	}
	if v.withoutPolicies {
		if err := deletePolicies(ctx, c.Client()); err != nil {
			return &section{Title: name, Err: err}, nil
		}
	}
	dnsLogs := ""
	if o.logDir != "" {
		dnsLogs = filepath.Join(o.logDir, name, "coredns")
	}
	dns, err := startClusterDNS(ctx, dnsLogs)
	if err != nil {
		return &section{Title: name, Err: err}, nil
	}
	defer dns.stop()
	base, err := configFromCluster(ctx, c, dns.addr)
	if err != nil {
		return &section{Title: name, Err: err}, nil
	}
	logf("scale: %d nodes at once, in-process agents (%s), SETTLE_TIME=%s (load average %s)", nodes, v.agentsStart(), settle, loadavg())
	logDir := ""
	if o.logDir != "" {
		logDir = filepath.Join(o.logDir, name)
	}
	queriesBefore, errBefore := dns.queries(ctx)
	s, r := benchScale(ctx, c, base, nodes, settle, v.pace, "scale", logDir)
	if queriesAfter, err := dns.queries(ctx); err == nil && errBefore == nil {
		s.add("DNS queries CoreDNS answered per node (the dns check's, resends included)", fmt.Sprintf("%.2f", (queriesAfter-queriesBefore)/float64(nodes)))
	}
	if v.withoutPolicies {
		s.Title += ", without nodeready's admission policies"
	}
	if v.pace > 0 {
		s.Title += ", agents started " + v.agentsStart()
		s.note("The agents started %s rather than all in the same instant: kube-controller-manager's DaemonSet "+
			"controller creates their pods at most --kube-api-qps a second (%d by default). The nodes, pods and tokens "+
			"were all created at once before, as in the burst, so the agents' phase lasts at least %s whatever "+
			"nodeready does: its own part is agent start to released, per node.", v.agentsStart(), controllerQPS,
			secs(time.Duration(float64(nodes)/v.pace*float64(time.Second))))
	}
	logf("scale: done, %d not released", s.Failures)
	return s, r
}

// agentsStart says how the run's agents start.
func (v scaleVariant) agentsStart() string {
	if v.pace > 0 {
		return fmt.Sprintf("%g a second", v.pace)
	}
	return "all at once"
}
