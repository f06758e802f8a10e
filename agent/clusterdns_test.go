package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// noClusterDNS is the EndpointSlice of kube-system/kube-dns with its only pod not ready: no
// cluster DNS runs anywhere.
func noClusterDNS() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kube-dns-x", Namespace: "kube-system", Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: new(false)}}},
	}
}

// withoutClusterDNS is a dns check that fails while kube-system/kube-dns is down, and a
// command check that passes.
var withoutClusterDNS = map[string]string{"CHECKS": "dns,command", "CHECK_COMMAND": "/bin/true", "CLUSTER_DNS_SERVICE": "kube-system/kube-dns"}

// TestNoClusterDNSReleasesAndSaysSo: when no cluster DNS runs anywhere, the dns check cannot
// hold the node (every node would be held, and the DNS pods with them); the release says so
// in the condition and a Warning Event.
func TestNoClusterDNSReleasesAndSaysSo(t *testing.T) {
	srv, dns := dnsServer(t)
	srv.SetBroken(true)
	c := newCluster(heldNode(), noClusterDNS())
	r := runNew(t, c, dns, withoutClusterDNS)

	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	const skipped = "dns ok.test.: skipped: cannot be checked: no cluster DNS is running (kube-system/kube-dns has no ready endpoint): " +
		`resolve "ok.test."`
	cond := c.condition(t)
	assert.Equal(t, corev1.ConditionTrue, cond.Status)
	assert.Equal(t, string(wellknown.Verified), cond.Reason)
	assert.True(t, strings.HasPrefix(cond.Message, "1 of 2 checks passed, "+skipped), cond.Message)
	e := c.waitEvent(t, wellknown.DNSNotChecked)
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.True(t, strings.HasPrefix(e.Note, "Released without the dns check: "+skipped), e.Note)
}

// TestDNSNotCheckedOnceAtTheRelease: rounds that pass without the dns check but then wait
// (for Karpenter's registration) or fail to release say nothing of a release; the
// DNSNotChecked Event comes once, with the release.
func TestDNSNotCheckedOnceAtTheRelease(t *testing.T) {
	srv, dns := dnsServer(t)
	srv.SetBroken(true)
	c := newCluster(unregistered(heldNode()), noClusterDNS())
	away := c.fault("patch", "", apierrors.NewServiceUnavailable("the server is currently unable to handle the request"))
	r := runNew(t, c, dns, withoutClusterDNS)

	waitFor(t, "rounds that wait for the registration", func() bool { return rounds(r.Agent) >= 3 })
	assert.Zero(t, c.requests("patch", ""), "a release before the registration")
	assert.Empty(t, c.eventsOf(t, wellknown.DNSNotChecked), "nothing was released yet")
	register(t, c)
	waitFor(t, "rounds whose release fails", func() bool { return c.requests("patch", "") >= 2 })
	assert.Empty(t, c.eventsOf(t, wellknown.DNSNotChecked), "nothing was released yet")
	away.Store(false)
	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	require.NoError(t, r.stop(t))
	c.emittedOnce(t, wellknown.DNSNotChecked)
}
