package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// nodereadyPolicies are the ValidatingAdmissionPolicies of manifests/04-admission-policy.yaml,
// each bound by a binding of the same name.
var nodereadyPolicies = []string{"nodeready-own-node", "nodeready-own-events"}

// The steady load of policyLoad: what the cluster's other clients send through the policies'
// matchConstraints while nodeready has nothing to verify. The rates are those of a cluster of
// n nodes as the kubelet's defaults make them, and stated assumptions for the rest.
const (
	// kubeletStatusPeriod: a kubelet PATCHes its Node's status once per
	// nodeStatusReportFrequency (5m) when nothing changed; its heartbeat goes to a Lease,
	// which the policies do not match.
	kubeletStatusPeriod = 5 * time.Minute
	// controllerNodePeriod: node writes of a controller with a ServiceAccount (node
	// lifecycle taints, a CNI agent's annotations, an autoscaler's labels), once per node in
	// this period: an assumption.
	controllerNodePeriod = 10 * time.Minute
	// eventsPerSecond: Events of the whole cluster, half from kubelets (about pods in their
	// namespaces and about their Node in default), half from controllers that authenticate
	// as ServiceAccounts: an assumption.
	eventsPerSecond = 100
	// Phases of the steady load: pairs of with and without the policies, alternating so
	// that a drift of the machine's load falls on both.
	policyPhasePairs = 3
	policyPhase      = 30 * time.Second
	policyWarmUp     = 5 * time.Second
	// policyConcurrency bounds the load's requests in flight.
	policyConcurrency = 64
)

// Who sends the steady load, impersonated by the admin: a kubelet, and two of
// kube-controller-manager's controllers as it runs them with --use-service-account-credentials
// (their bootstrap ClusterRoles grant what they send here).
const (
	workloadNamespace = "bench-workload"
	nodeControllerSA  = "system:serviceaccount:kube-system:node-controller"
	rsControllerSA    = "system:serviceaccount:kube-system:replicaset-controller"
)

var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}

// runPolicies measures what nodeready's admission policies cost the API server: a steady
// cluster's node writes and Events with and without them on one control plane, then the
// largest scale burst with and without them.
func runPolicies(ctx context.Context, b *bench) []*section {
	nodes := slices.Max(b.o.nodes)
	b.logf("policies: a steady cluster of %d nodes, with and without nodeready's admission policies", nodes)
	sections := []*section{benchPoliciesSteady(ctx, b, nodes)}
	var runs []*scaleResult
	for _, without := range []bool{false, true} {
		if ctx.Err() != nil {
			break
		}
		s, r := scaleBenchmark(ctx, b.o, b.m, nodes, b.o.settles[0], b.logf, scaleVariant{withoutPolicies: without})
		sections = append(sections, s)
		if r != nil {
			runs = append(runs, r)
		}
	}
	if len(runs) == 2 {
		sections = append(sections, comparePolicyBurst(runs[0], runs[1]))
	}
	return sections
}

// admissionMetrics are the API server's metrics that say what admission cost.
var admissionMetrics = []string{
	"apiserver_admission_controller_admission_duration_seconds_sum", "apiserver_admission_controller_admission_duration_seconds_count",
	"apiserver_admission_match_condition_evaluation_seconds_sum", "apiserver_admission_match_condition_evaluation_seconds_count",
}

// policyCost is what one stretch of time cost the API server, read from two scrapes.
type policyCost struct {
	cpu      float64 // seconds
	elapsed  time.Duration
	requests map[string]float64 // by requestKey
	duration map[string]float64 // mean seconds, by requestKey
	// vap is the ValidatingAdmissionPolicy plugin's time per request and how many it saw,
	// by operation: every policy's match, matchConditions and validations.
	vap, vapCount map[string]float64
	// match is the matchConditions' time per request they turned away, and how many, by
	// policy: the API server observes apiserver_admission_match_condition_evaluation_seconds
	// only when a condition is false (or fails). The agent's own requests, which go on to the
	// validations, are in the plugin's time alone; so are the validations, whose
	// apiserver_validating_admission_policy_check_duration_seconds counts only refusals.
	match, matchCount map[string]float64
}

func newPolicyCost(before, after metricSet, elapsed time.Duration) policyCost {
	c := policyCost{
		cpu: after.sum("process_cpu_seconds_total") - before.sum("process_cpu_seconds_total"), elapsed: elapsed,
		requests: requestDelta(before, after),
	}
	sums, counts := seriesDelta(before, after, "apiserver_request_duration_seconds_sum"), seriesDelta(before, after, "apiserver_request_duration_seconds_count")
	c.duration = ratio(sums, counts)
	by := func(name, label string, where map[string]string) map[string]float64 {
		out := map[string]float64{}
		for key, s := range after {
			if s.Name != name || !labelsMatch(s.Labels, where) {
				continue
			}
			if d := s.Value - before[key].Value; d > 0 {
				out[s.Labels[label]] += d
			}
		}
		return out
	}
	vapOnly := map[string]string{"name": "ValidatingAdmissionPolicy", "type": "validate"}
	c.vapCount = by("apiserver_admission_controller_admission_duration_seconds_count", "operation", vapOnly)
	c.vap = ratio(by("apiserver_admission_controller_admission_duration_seconds_sum", "operation", vapOnly), c.vapCount)
	policies := map[string]string{"kind": "policy", "type": "validate"}
	c.matchCount = by("apiserver_admission_match_condition_evaluation_seconds_count", "name", policies)
	c.match = ratio(by("apiserver_admission_match_condition_evaluation_seconds_sum", "name", policies), c.matchCount)
	return c
}

func labelsMatch(labels, where map[string]string) bool {
	for k, v := range where {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func ratio(sums, counts map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, n := range counts {
		if n > 0 {
			out[k] = sums[k] / n
		}
	}
	return out
}

// benchPoliciesSteady registers nodes, then sends a steady cluster's node writes and Events
// in phases with the policies bound and without, alternating, and reads from the API
// server's metrics what each phase cost it.
func benchPoliciesSteady(ctx context.Context, b *bench, nodes int) *section {
	s := &section{Title: fmt.Sprintf("policies: a steady cluster of %d nodes", nodes)}
	c, err := startCluster(ctx, b.o, "policies-steady", b.m, b.logf)
	if err != nil {
		s.Err = err
		return s
	}
	defer c.Stop()
	if err := removeDaemonSet(ctx, c); err != nil {
		s.Err = err
		return s
	}
	fastCfg := c.ControlPlane().RESTConfig()
	fastCfg.QPS, fastCfg.Burst = -1, 0
	fast, err := kubernetes.NewForConfig(fastCfg)
	if err != nil {
		s.Err = err
		return s
	}
	bindings, err := saveBindings(ctx, fast)
	if err != nil {
		s.Err = err
		return s
	}
	start := time.Now()
	names, err := registerNodes(ctx, fast, nodes)
	if err != nil {
		s.Err = err
		return s
	}
	b.logf("policies: %d nodes registered in %s (load average %s)", nodes, secs(time.Since(start)), loadavg())
	if _, err := fast.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		s.Err = err
		return s
	}

	load := newPolicyLoad(fast, names)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go load.run(loadCtx)

	var with, without []policyCost
	for i := range 2 * policyPhasePairs {
		bound := i%2 == 0
		if err := setBindings(ctx, fast, bindings, bound); err != nil {
			s.Err = err
			return s
		}
		// The policy plugin follows the bindings through an informer; the warm-up lets it
		// catch up, and lets the load's requests of the last phase finish.
		time.Sleep(policyWarmUp)
		before, err := scrapeAdmission(ctx, c)
		if err != nil {
			s.Err = err
			return s
		}
		sentBefore := load.sent()
		phaseStart := time.Now()
		select {
		case <-ctx.Done():
			s.Err = ctx.Err()
			return s
		case <-time.After(policyPhase):
		}
		after, err := scrapeAdmission(ctx, c)
		if err != nil {
			s.Err = err
			return s
		}
		cost := newPolicyCost(before, after, time.Since(phaseStart))
		b.logf("policies: phase %d (policies bound: %t): %d requests sent, API server %.2f cores", i+1, bound,
			load.sent()-sentBefore, cost.cpu/cost.elapsed.Seconds())
		if bound {
			with = append(with, cost)
		} else {
			without = append(without, cost)
		}
	}
	stopLoad()
	load.wait()
	reportSteady(s, nodes, load, with, without)
	// Put the bindings back as installed.
	_ = setBindings(context.WithoutCancel(ctx), fast, bindings, true)
	return s
}

// scrapeAdmission reads scrapedMetrics.
func scrapeAdmission(ctx context.Context, c *harness.Cluster) (metricSet, error) {
	body, err := c.Client().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	return parseMetrics(body, scrapedMetrics...)
}

// saveBindings reads nodeready's policy bindings as installed.
func saveBindings(ctx context.Context, client kubernetes.Interface) ([]*admissionv1.ValidatingAdmissionPolicyBinding, error) {
	var out []*admissionv1.ValidatingAdmissionPolicyBinding
	for _, name := range nodereadyPolicies {
		b, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read binding %s: %w", name, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// setBindings binds nodeready's policies (bound) or deletes their bindings: without a
// binding a policy is not evaluated at all.
func setBindings(ctx context.Context, client kubernetes.Interface, saved []*admissionv1.ValidatingAdmissionPolicyBinding, bound bool) error {
	api := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	for _, b := range saved {
		var err error
		if bound {
			fresh := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: b.Labels}, Spec: b.Spec}
			_, err = api.Create(ctx, fresh, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		} else {
			err = api.Delete(ctx, b.Name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("binding %s: %w", b.Name, err)
		}
	}
	return nil
}

// deletePolicies deletes nodeready's policies and their bindings, for a run without them.
func deletePolicies(ctx context.Context, client kubernetes.Interface) error {
	adm := client.AdmissionregistrationV1()
	for _, name := range nodereadyPolicies {
		if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := adm.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// registerNodes creates n Ready nodes, verified already, as those of a running cluster are.
func registerNodes(ctx context.Context, client kubernetes.Interface, n int) ([]string, error) {
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("steady-%d", i)
	}
	var firstErr error
	var once sync.Once
	var next atomic.Int64
	var wg sync.WaitGroup
	for range policyConcurrency {
		wg.Go(func() {
			for i := next.Add(1) - 1; int(i) < n; i = next.Add(1) - 1 {
				node := newNode(names[i], "steady")
				node.Spec.Taints = nil
				node.Labels["node-ready/verified"] = "true"
				err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 6},
					func(ctx context.Context) (bool, error) {
						_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
						return err == nil || apierrors.IsAlreadyExists(err), nil
					})
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("create node %s: %w", names[i], err) })
					return
				}
			}
		})
	}
	wg.Wait()
	return names, firstErr
}

// policyLoad sends the steady load: kubelet status PATCHes, a controller's node PATCHes and
// Events of kubelets and controllers, each kind at its rate, as the identities that send
// them in a cluster (impersonated).
type policyLoad struct {
	client kubernetes.Interface
	nodes  []string
	kinds  []*loadKind
	slots  chan struct{}
	wg     sync.WaitGroup
}

// loadKind is one kind of request of the load, its rate and what came of it.
type loadKind struct {
	name   string
	rate   float64 // per second
	send   func(ctx context.Context, i int) error
	count  atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	errs   []string
}

func newPolicyLoad(client kubernetes.Interface, nodes []string) *policyLoad {
	l := &policyLoad{client: client, nodes: nodes, slots: make(chan struct{}, policyConcurrency)}
	n := float64(len(nodes))
	l.kinds = []*loadKind{
		{name: "PATCH nodes/status by kubelets (system:node:…)", rate: n / kubeletStatusPeriod.Seconds(), send: l.kubeletStatus},
		{name: "PATCH nodes by a ServiceAccount (node-controller)", rate: n / controllerNodePeriod.Seconds(), send: l.controllerNode},
		{name: "POST events by kubelets (about pods, about their Node)", rate: eventsPerSecond / 2, send: l.kubeletEvent},
		{name: "POST events by a ServiceAccount (replicaset-controller)", rate: eventsPerSecond / 2, send: l.controllerEvent},
	}
	return l
}

func (l *policyLoad) run(ctx context.Context) {
	for _, k := range l.kinds {
		l.wg.Go(func() { l.pace(ctx, k) })
	}
}

func (l *policyLoad) wait() { l.wg.Wait() }

func (l *policyLoad) sent() int64 {
	var n int64
	for _, k := range l.kinds {
		n += k.count.Load()
	}
	return n
}

// pace sends k's requests at its rate until ctx ends, each on its own goroutine, at most
// policyConcurrency in flight.
func (l *policyLoad) pace(ctx context.Context, k *loadKind) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / k.rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case l.slots <- struct{}{}:
		}
		l.wg.Go(func() {
			defer func() { <-l.slots }()
			k.count.Add(1)
			if err := k.send(ctx, i); err != nil && ctx.Err() == nil {
				k.failed.Add(1)
				k.mu.Lock()
				if len(k.errs) < 3 {
					k.errs = append(k.errs, err.Error())
				}
				k.mu.Unlock()
			}
		})
	}
}

func (l *policyLoad) node(i int) string { return l.nodes[i%len(l.nodes)] }

func (l *policyLoad) kubeletStatus(ctx context.Context, i int) error {
	node := l.node(i)
	now := time.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":%q}]}}`, now)
	return l.client.CoreV1().RESTClient().Patch(types.StrategicMergePatchType).Resource("nodes").Name(node).SubResource("status").
		SetHeader("Impersonate-User", "system:node:"+node).SetHeader("Impersonate-Group", "system:nodes", "system:authenticated").
		Body([]byte(patch)).Do(ctx).Error()
}

func (l *policyLoad) controllerNode(ctx context.Context, i int) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.nodeready.io/seen":%q}}}`, time.Now().UTC().Format(time.RFC3339Nano))
	return l.client.CoreV1().RESTClient().Patch(types.MergePatchType).Resource("nodes").Name(l.node(i)).
		SetHeader("Impersonate-User", nodeControllerSA).SetHeader("Impersonate-Group", saGroups...).
		Body([]byte(patch)).Do(ctx).Error()
}

func (l *policyLoad) kubeletEvent(ctx context.Context, i int) error {
	node := l.node(i)
	ev := benchEvent(i, "kubelet", node)
	if i%2 == 0 {
		ev.Namespace = metav1.NamespaceDefault
		ev.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node), APIVersion: "v1"}
		ev.Reason, ev.Message = "NodeHasSufficientMemory", "Node "+node+" status is now: NodeHasSufficientMemory"
	}
	return l.client.CoreV1().RESTClient().Post().Namespace(ev.Namespace).Resource("events").
		SetHeader("Impersonate-User", "system:node:"+node).SetHeader("Impersonate-Group", "system:nodes", "system:authenticated").
		Body(ev).Do(ctx).Error()
}

func (l *policyLoad) controllerEvent(ctx context.Context, i int) error {
	ev := benchEvent(i, "replicaset-controller", "")
	ev.Reason, ev.Message = "SuccessfulCreate", "Created pod: "+ev.InvolvedObject.Name
	ev.InvolvedObject.Kind, ev.InvolvedObject.APIVersion = "ReplicaSet", "apps/v1"
	return l.client.CoreV1().RESTClient().Post().Namespace(ev.Namespace).Resource("events").
		SetHeader("Impersonate-User", rsControllerSA).SetHeader("Impersonate-Group", saGroups...).
		Body(ev).Do(ctx).Error()
}

// benchEvent is a core/v1 Event about a pod of the workload namespace, as client-go's
// recorder writes it.
func benchEvent(i int, component, host string) *corev1.Event {
	now := metav1.Now()
	pod := fmt.Sprintf("app-%d", i)
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: pod + ".", Namespace: workloadNamespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: workloadNamespace, Name: pod, UID: types.UID(pod), APIVersion: "v1"},
		Reason:         "Pulled", Message: "Container image \"registry.k8s.io/pause:3.10\" already present on machine",
		Source:         corev1.EventSource{Component: component, Host: host},
		FirstTimestamp: now, LastTimestamp: now, Count: 1, Type: corev1.EventTypeNormal,
	}
}

// reportSteady tables the phases with and without the policies side by side.
func reportSteady(s *section, nodes int, load *policyLoad, with, without []policyCost) {
	for _, k := range load.kinds {
		s.add("load: "+k.name, fmt.Sprintf("%.1f/s; %d sent, %d failed", k.rate, k.count.Load(), k.failed.Load()))
		for _, e := range k.errs {
			s.note("%s failed: %s", k.name, e)
		}
		s.Failures += int(k.failed.Load())
	}
	spread := func(f func(policyCost) float64, unit func(float64) string) string {
		render := func(cs []policyCost) string {
			var vs []float64
			for _, c := range cs {
				vs = append(vs, f(c))
			}
			if len(vs) == 0 {
				return "no samples"
			}
			slices.Sort(vs)
			return fmt.Sprintf("%s (%s … %s)", unit(vs[len(vs)/2]), unit(vs[0]), unit(vs[len(vs)-1]))
		}
		return render(with) + " with, " + render(without) + " without"
	}
	cores := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	micro := func(v float64) string { return fmt.Sprintf("%.0f µs", v*1e6) }
	milli := func(v float64) string { return ms(time.Duration(v * float64(time.Second))) }
	s.add("kube-apiserver CPU, cores (median of the phases, min … max)", spread(func(c policyCost) float64 { return c.cpu / c.elapsed.Seconds() }, cores))
	for _, key := range []string{"PATCH nodes/status", "PATCH nodes", "POST events"} {
		s.add("mean request duration: "+key, spread(func(c policyCost) float64 { return c.duration[key] }, milli))
	}
	for _, op := range []string{"UPDATE", "CREATE"} {
		s.add("ValidatingAdmissionPolicy plugin per "+op+" request", spread(func(c policyCost) float64 { return c.vap[op] }, micro))
	}
	for _, p := range nodereadyPolicies {
		s.add("matchConditions of "+p+" per request they turned away", spread(func(c policyCost) float64 { return c.match[p] }, micro))
	}
	last := with[len(with)-1]
	var counts []string
	for _, p := range slices.Sorted(maps.Keys(last.matchCount)) {
		counts = append(counts, fmt.Sprintf("%s %.0f", p, last.matchCount[p]))
	}
	s.add("requests the matchConditions turned away, last phase with the policies", strings.Join(counts, "; "))
	s.note("%d nodes registered and verified; no agent runs. The load, as the identities that send it in a cluster "+
		"(impersonated by the benchmark's admin client, which costs the same with and without the policies): each kubelet "+
		"PATCHes its Node's status once per nodeStatusReportFrequency (5m, its heartbeat goes to a Lease); a controller with "+
		"a ServiceAccount (kube-controller-manager's node-controller, as --use-service-account-credentials runs it) PATCHes "+
		"each node once per %s; and %d Events a second, half from kubelets (about pods, and about their Node in "+
		"default), half from a controller's ServiceAccount (replicaset-controller), all through the core/v1 API as "+
		"client-go's recorder writes them. The rates are assumptions of a busy %d-node cluster: the figures per "+
		"request scale to others.", nodes, controllerNodePeriod, eventsPerSecond, nodes)
	s.note("%d phases of %s each, alternating with nodeready's two policy bindings in place and deleted (a policy "+
		"without a binding is not evaluated), on one control plane; each after %s for the API server's policy "+
		"informer and the load to settle. Each figure is the median of its phases, with the lowest and the highest. "+
		"The ValidatingAdmissionPolicy plugin's time (`apiserver_admission_controller_admission_duration_seconds`) "+
		"is per request that reached it, by operation: node writes are UPDATE, Events CREATE. The matchConditions' time "+
		"(`apiserver_admission_match_condition_evaluation_seconds`, which the API server records for the requests they turn "+
		"away) includes building their input: the request and, converted, the old and the new object.", 2*policyPhasePairs, policyPhase, policyWarmUp)
}

// comparePolicyBurst puts the burst with the policies beside the burst without.
func comparePolicyBurst(with, without *scaleResult) *section {
	s := &section{Title: fmt.Sprintf("policies: the %d-node burst with and without them", with.nodes)}
	pair := func(f func(*scaleResult) string) string { return f(with) + " with, " + f(without) + " without" }
	s.add("nodeready's added time: agents started to last label seen", pair(func(r *scaleResult) string { return secs(r.allVerified) }))
	s.add("per node: agent start to released, p50", pair(func(r *scaleResult) string { return secs(r.fromAgentP50) }))
	s.add("kube-apiserver CPU per node", pair(func(r *scaleResult) string { return fmt.Sprintf("%.1f ms", r.apiCPUPerNode*1000) }))
	s.add("429s per node", pair(func(r *scaleResult) string { return fmt.Sprintf("%.2f", r.rejected/float64(r.nodes)) }))
	micro := func(v float64) string { return fmt.Sprintf("%.0f µs", v*1e6) }
	for _, op := range []string{"UPDATE", "CREATE"} {
		s.add("ValidatingAdmissionPolicy plugin per "+op+" request (requests)", pair(func(r *scaleResult) string {
			return fmt.Sprintf("%s (%.0f)", micro(r.admission.vap[op]), r.admission.vapCount[op])
		}))
	}
	for _, p := range nodereadyPolicies {
		s.add("matchConditions of "+p+" per request they turned away (requests)", fmt.Sprintf("%s (%.0f)",
			micro(with.admission.match[p]), with.admission.matchCount[p]))
	}
	var inVAP float64
	for op, n := range with.admission.vapCount {
		inVAP += n * with.admission.vap[op]
	}
	s.add("time in the ValidatingAdmissionPolicy plugin, all requests of the burst with the policies", fmt.Sprintf("%.1f s (kube-apiserver CPU %.1f s)", inVAP, with.apiCPUPerNode*float64(with.nodes)))
	s.note("The two bursts are the scale benchmark's, each on a control plane of its own, one after the other: with " +
		"nodeready's policies as installed, and with both policies and their bindings deleted before the burst. The " +
		"plugin's, the matchConditions' and the validations' times are wall-clock times per request from the API " +
		"server's own metrics; on two saturated cores they include waiting for a core.")
	return s
}
