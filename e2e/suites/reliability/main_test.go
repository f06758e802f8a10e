package reliability

import (
	"testing"

	"github.com/nodeready/nodeready/e2e/framework"
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

func TestMain(m *testing.M) { framework.Main(m) }

// env is what every test works with: the shared cluster and its audit log.
type env struct {
	fw    *framework.Framework
	audit *auditLog
}

// setup returns the test's Framework on the package's shared cluster, starting it on first
// use: a control plane with the agents' requests audited, nodeready installed from
// manifests/ with the loopback configuration of the harness.
func setup(t *testing.T) env {
	t.Helper()
	fw := framework.New(t, framework.Options{Shared: true, AuditPolicy: auditPolicy})
	return env{fw: fw, audit: &auditLog{path: fw.AuditLog()}}
}

// newFleet starts a fleet for the test; its nodes are removed when the test ends.
func (e env) newFleet(t *testing.T, name string) *framework.Fleet {
	t.Helper()
	return e.fw.For(t).NewFleet(name)
}
