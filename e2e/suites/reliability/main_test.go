package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// agentUser is who the agents are to the API server: the ServiceAccount of
// manifests/00-serviceaccount.yaml.
const agentUser = "system:serviceaccount:kube-system:nodeready"

// auditPolicy records every request of the agents, and nothing else, at the Metadata level:
// who asked, for what, on which node, and the answer's code. The apiserver_request_total
// metric counts requests by verb and resource but not by client; the audit log tells the
// agents' requests apart from the kubelets', controllers' and the tests' own.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Metadata
    users: ["` + agentUser + `"]
  - level: None
`

// startTimeout bounds the start of the shared cluster.
const startTimeout = 5 * time.Minute

// shared is the one cluster the tests of the package run on, one test after another. It
// starts with the first test that asks for it and stops after the last.
var shared struct {
	once    sync.Once
	cluster *harness.Cluster
	audit   *auditLog
	logDir  string
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if shared.logDir != "" {
		if code == 0 && os.Getenv(harness.LogsEnv) == "" {
			os.RemoveAll(shared.logDir)
		} else {
			fmt.Fprintf(os.Stderr, "control plane, audit, kubelet and agent logs kept in %s\n", shared.logDir)
		}
	}
	os.Exit(code)
}

// env is what every test works with: the shared cluster and its audit log.
type env struct {
	c     *harness.Cluster
	audit *auditLog
}

// setup returns the shared cluster, starting it on first use: a control plane with the
// agents' requests audited, nodeready installed from manifests/ with the loopback
// configuration of the harness.
func setup(t *testing.T) env {
	t.Helper()
	shared.once.Do(func() {
		shared.cluster, shared.audit, shared.logDir, shared.err = start()
	})
	if shared.err != nil {
		t.Fatalf("start cluster: %v", shared.err)
	}
	return env{c: shared.cluster, audit: shared.audit}
}

func start() (*harness.Cluster, *auditLog, string, error) {
	keep := os.Getenv(harness.LogsEnv)
	if keep != "" {
		if err := os.MkdirAll(keep, 0o755); err != nil {
			return nil, nil, "", err
		}
	}
	logDir, err := os.MkdirTemp(keep, "nodeready-reliability-")
	if err != nil {
		return nil, nil, "", err
	}
	policy := filepath.Join(logDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, nil, logDir, err
	}
	audit := &auditLog{path: filepath.Join(logDir, "audit.log")}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := harness.Start(ctx, harness.Options{
		LogDir: logDir,
		ControlPlane: controlplane.Options{APIServerArgs: []string{
			"--audit-policy-file=" + policy,
			"--audit-log-path=" + audit.path,
			"--audit-log-format=json",
		}},
	})
	return c, audit, logDir, err
}

// newFleet starts a fleet for the test; its nodes are removed when the test ends.
func (e env) newFleet(t *testing.T, name string) *harness.Fleet {
	t.Helper()
	return harness.NewFleetForTest(t, e.c, name)
}
