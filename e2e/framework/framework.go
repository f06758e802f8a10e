package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
	"github.com/nodeready/nodeready/e2e/framework/process"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
)

// Options chooses a test's environment. The zero value is a control plane of the run's
// Kubernetes release with nodeready installed from manifests/, for simulated nodes.
type Options struct {
	// Cluster configures the control plane and the install (harness.Options): API server
	// flags, no manifests for a test that installs nodeready another way, extra settings.
	Cluster harness.Options
	// ControlPlaneOnly starts the control plane alone, with Cluster.ControlPlane, and
	// installs nothing: for tests that apply manifests themselves and run no agent.
	ControlPlaneOnly bool
	// Kubernetes, when set, is the release of the control plane, whatever release the run
	// chose for the other tests (controlplane.VersionEnv); the test fails when the API
	// server reports another.
	Kubernetes string
	// Karpenter starts the real Karpenter (kwok provider) on the cluster, and the Dynamic
	// client its resources need.
	Karpenter bool
	// RealNodes, when not nil, starts a control plane with real nodes on this machine
	// instead (Linux and root; the test is skipped elsewhere).
	RealNodes *RealNodes
	// AuditPolicy, with Shared, is the API server's audit policy; the log is at AuditLog.
	AuditPolicy string
	// Shared starts the environment once for every test of the package that asks for it
	// and stops it after the last (Main); the tests run one after another on it.
	Shared bool
}

// RealNodes configures a cluster of real nodes.
type RealNodes struct {
	realnode.ClusterOptions
	// Start is how many of the nodes, the first ones, are started at once; the others are
	// prepared and start when the test says (Real().StartNodeAt).
	Start int
}

// Framework is one test's view of its environment: the cluster, the clients, the fleets of
// simulated nodes or the real nodes, and the waits a test needs. Every method fails the
// test on an error it cannot return, and everything it starts stops when the test ends.
type Framework struct {
	t   *testing.T
	env *env
}

// env is what the Frameworks of a test and its subtests share.
type env struct {
	cluster   *harness.Cluster           // nodeready on simulated nodes; nil otherwise
	cp        *controlplane.ControlPlane // always
	karpenter *karpenter.Karpenter
	dynOnce   sync.Once
	dynamic   dynamic.Interface
	dynErr    error
	real      *realnode.Cluster
	auditLog  string
	logDir    string // of a shared environment, removed by Main after a passing run
	err       error  // of a shared environment that did not start
}

// New starts the environment opts describe for t, and stops it when t ends. The subtests
// of t get their own Framework on it with Run.
func New(t *testing.T, opts Options) *Framework {
	t.Helper()
	if opts.Shared {
		return &Framework{t: t, env: sharedEnv(t, opts)}
	}
	e := &env{}
	switch {
	case opts.RealNodes != nil:
		e.real = startRealNodes(t, *opts.RealNodes)
		e.cp = e.real.CP
	case opts.ControlPlaneOnly:
		o := opts.Cluster.ControlPlane
		o.BinDir = binDir(t, opts.Kubernetes, o.BinDir)
		e.cp = controlplane.StartForTestWith(t, o)
	default:
		o := opts.Cluster
		o.ControlPlane.BinDir = binDir(t, opts.Kubernetes, o.ControlPlane.BinDir)
		e.cluster = harness.StartForTest(t, o)
		e.cp = e.cluster.ControlPlane()
	}
	f := &Framework{t: t, env: e}
	if opts.Kubernetes != "" && e.cluster != nil && e.cluster.KubernetesVersion() != opts.Kubernetes {
		t.Fatalf("the API server's version is %s, want %s", e.cluster.KubernetesVersion(), opts.Kubernetes)
	}
	if opts.Karpenter {
		f.startKarpenter()
	}
	return f
}

// binDir is the control plane binaries of release version, built when they are not yet
// (controlplane.Build), or dir when no release is asked.
func binDir(t *testing.T, version, dir string) string {
	t.Helper()
	if version == "" {
		return dir
	}
	bin, err := controlplane.Build(version)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// shared is the environment of the package's tests that ask for a shared one.
var shared struct {
	once sync.Once
	env  *env
}

// sharedStartTimeout bounds the start of a shared environment.
const sharedStartTimeout = 5 * time.Minute

// sharedEnv starts the package's shared environment on first use.
func sharedEnv(t *testing.T, opts Options) *env {
	t.Helper()
	shared.once.Do(func() { shared.env = startShared(opts) })
	if shared.env.err != nil {
		t.Fatalf("start cluster: %v", shared.env.err)
	}
	return shared.env
}

func startShared(opts Options) *env {
	e := &env{}
	keep := os.Getenv(harness.LogsEnv)
	if keep != "" {
		if e.err = os.MkdirAll(keep, 0o755); e.err != nil {
			return e
		}
	}
	if e.logDir, e.err = os.MkdirTemp(keep, "nodeready-e2e-shared-"); e.err != nil {
		return e
	}
	o := opts.Cluster
	o.LogDir = e.logDir
	if opts.AuditPolicy != "" {
		file := filepath.Join(e.logDir, "audit-policy.yaml")
		if e.err = os.WriteFile(file, []byte(opts.AuditPolicy), 0o644); e.err != nil {
			return e
		}
		e.auditLog = filepath.Join(e.logDir, "audit.log")
		o.ControlPlane.APIServerArgs = append(o.ControlPlane.APIServerArgs,
			"--audit-policy-file="+file, "--audit-log-path="+e.auditLog, "--audit-log-format=json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedStartTimeout)
	defer cancel()
	e.cluster, e.err = harness.Start(ctx, o)
	if e.err == nil {
		e.cp = e.cluster.ControlPlane()
	}
	return e
}

// Main runs the package's tests and then stops its shared environment; a package whose tests
// share one calls it from TestMain. The logs are removed after a passing run unless
// $NODEREADY_E2E_LOGS keeps them.
func Main(m *testing.M) {
	code := m.Run()
	if e := shared.env; e != nil {
		if e.cluster != nil {
			e.cluster.Stop()
		}
		if e.logDir != "" {
			if code == 0 && os.Getenv(harness.LogsEnv) == "" {
				os.RemoveAll(e.logDir)
			} else {
				fmt.Fprintf(os.Stderr, "control plane, audit, kubelet and agent logs kept in %s\n", e.logDir)
			}
		}
	}
	os.Exit(code)
}

// Run runs fn as the subtest name of f's test, with a Framework of its own on the same
// environment.
func (f *Framework) Run(name string, fn func(t *testing.T, f *Framework)) bool {
	return f.t.Run(name, func(t *testing.T) { fn(t, f.For(t)) })
}

// For returns a Framework for t, a subtest of f's test, on the same environment.
func (f *Framework) For(t *testing.T) *Framework { return &Framework{t: t, env: f.env} }

// Cluster is the control plane with nodeready installed; nil for ControlPlaneOnly and real
// nodes.
func (f *Framework) Cluster() *harness.Cluster { return f.env.cluster }

// ControlPlane is the test's control plane.
func (f *Framework) ControlPlane() *controlplane.ControlPlane { return f.env.cp }

// Real is the cluster of real nodes (Options.RealNodes).
func (f *Framework) Real() *realnode.Cluster { return f.env.real }

// Client is an admin client of the control plane.
func (f *Framework) Client() kubernetes.Interface { return f.env.cp.Client() }

// Dynamic is a dynamic admin client of the control plane.
func (f *Framework) Dynamic() dynamic.Interface {
	f.t.Helper()
	f.env.dynOnce.Do(func() { f.env.dynamic, f.env.dynErr = dynamic.NewForConfig(f.env.cp.RESTConfig()) })
	if f.env.dynErr != nil {
		f.t.Fatalf("dynamic client: %v", f.env.dynErr)
	}
	return f.env.dynamic
}

// Kubectl runs kubectl against the control plane, as an admin, and returns its combined
// output; the error holds it too.
func (f *Framework) Kubectl(args ...string) (string, error) {
	return f.env.cp.Kubectl(f.t.Context(), nil, args...)
}

// KubectlContext is Kubectl bounded by ctx instead of the test, as a clean-up needs.
func (f *Framework) KubectlContext(ctx context.Context, args ...string) (string, error) {
	return f.env.cp.Kubectl(ctx, nil, args...)
}

// KubectlIn is Kubectl with stdin as kubectl's input.
func (f *Framework) KubectlIn(stdin io.Reader, args ...string) (string, error) {
	return f.env.cp.Kubectl(f.t.Context(), stdin, args...)
}

// RepoRoot is the repository's root, where manifests/, charts/ and README.md are.
func (f *Framework) RepoRoot() string {
	f.t.Helper()
	return RepoRoot(f.t)
}

// RepoRoot is the repository's root for a test without a Framework; it fails t outside
// the repository.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Manifest is the path of a file or folder under the repository's manifests/.
func (f *Framework) Manifest(elem ...string) string {
	f.t.Helper()
	return filepath.Join(append([]string{f.RepoRoot(), "manifests"}, elem...)...)
}

// KubernetesVersion is the API server's version.
func (f *Framework) KubernetesVersion() string {
	if f.env.cluster != nil {
		return f.env.cluster.KubernetesVersion()
	}
	f.t.Helper()
	v, err := f.Client().Discovery().ServerVersion()
	if err != nil {
		f.t.Fatalf("server version: %v", err)
	}
	return v.GitVersion
}

// AuditLog is the path of the API server's audit log (Options.AuditPolicy).
func (f *Framework) AuditLog() string { return f.env.auditLog }

// Karpenter is the running Karpenter (Options.Karpenter).
func (f *Framework) Karpenter() *karpenter.Karpenter { return f.env.karpenter }

// startKarpenter starts Karpenter and stops it when the test ends; after a failure it
// reports the end of Karpenter's log.
func (f *Framework) startKarpenter() {
	t := f.t
	t.Helper()
	k, err := karpenter.Start(t.Context(), f.env.cluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.Stop()
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", k.LogPath(), process.Tail(k.LogPath(), 40))
		}
	})
	f.env.karpenter = k
}

// requireRoot skips t where real nodes cannot run.
func requireRoot(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("real nodes need Linux and root")
	}
}

// TokenClient is a client that acts with the ServiceAccount's token: bound to the pod, as the
// kubelet equips the pod's containers, or bound to nothing when pod is empty.
func (f *Framework) TokenClient(namespace, serviceAccount, pod string, uid types.UID) kubernetes.Interface {
	f.t.Helper()
	return controlplane.ServiceAccountClientForTest(f.t, f.env.cp, namespace, serviceAccount, pod, uid)
}
