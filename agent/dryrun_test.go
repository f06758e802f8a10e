package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// TestDryRunTable: --dry-run prints a row per check and target, a passing dns check, a
// failing command and an API check that cannot run without a kubeconfig, and exits 1.
func TestDryRunTable(t *testing.T) {
	_, dns := dnsServer(t)
	cfg := loadConfig(t, with(dns, map[string]string{"CHECKS": "dns,command,apiserver", "CHECK_COMMAND": "/bin/false"}), true)
	var out strings.Builder
	code := DryRun(t.Context(), cfg, nil, &out)

	assert.Equal(t, 1, code)
	assert.Regexp(t, `(?m)^CHECK\s+TARGET\s+RESULT\s+DURATION\s+DETAIL$`, out.String())
	assert.Regexp(t, `(?m)^dns\s+ok\.test\.\s+pass\s`, out.String())
	assert.Regexp(t, `(?m)^command\s+/bin/false\s+fail\s.*exit status 1`, out.String())
	assert.Regexp(t, `(?m)^apiserver\s+-\s+skip\s.*no kubeconfig`, out.String())
	assert.Contains(t, out.String(), "1 passed, 1 failed, 0 misconfigured, 1 skipped")
}

// TestDryRunSaysWhatWasProven: with a kubeconfig the podnetwork row names the pods reached
// on other nodes, with what was proven there (the size, or that it was not), in its DETAIL.
func TestDryRunSaysWhatWasProven(t *testing.T) {
	client := newCluster(externalNode(), coreDNSPod(t, "node-b"))
	cfg := loadConfig(t, with(fast, map[string]string{"CHECKS": "podnetwork"}), true)
	var out strings.Builder
	code := DryRun(t.Context(), cfg, adapt.Clientset(client), &out)

	assert.Equal(t, 0, code, out.String())
	// Full size is proven both ways where this test may open ping sockets, else said not to be.
	assert.Regexp(t, `(?m)^podnetwork\s+pods of kube-system/kube-dns on up to 3 other nodes\s+pass\s.*podnetwork reached 127\.0\.0\.1 on node-b`+
		`(, [0-9]+-byte packets both ways|; podnetwork did not prove full-size packets with 127\.0\.0\.1 on node-b: )`, out.String())
}
