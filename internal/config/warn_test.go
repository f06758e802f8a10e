package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
)

// TestUnknownLookalikes: a variable one or two letters from a name nodeready reads, or
// the same in another case, is named with the name it looks like; the rest of a pod's
// environment (Service links, the Go runtime's, the shell's) is not.
func TestUnknownLookalikes(t *testing.T) {
	environ := []string{
		"CHECK_TIMOUT=10s",     // a letter missing
		"SETLE_TIME=5s",        // a letter missing
		"DNS_TEST_DOMAIN=a.b",  // plural lost
		"check_timeout=10s",    // case
		"RETRY_BACKOF_MAX=1m",  // a letter missing
		"MAX_RETRIES=5",        // known
		"INITIAL_TIMEOUT=300s", // known
		"CLUSTER_DNS_IP=",      // kube-node-ready's, refused or honoured by name
		"KUBE_ROOT_CA_CRT=pem", // the in-cluster client's
		"KUBERNETES_SERVICE_HOST=10.96.0.1",
		"KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
		"KUBE_DNS_SERVICE_HOST=10.96.0.10",
		"KUBE_DNS_PORT=udp://10.96.0.10:53",
		"GOMEMLIMIT=100MiB",
		"HOSTNAME=nodeready-abcde",
		"PATH=/usr/bin",
		"HOME=/",
		"=C:=C:\\", // Windows' drive variables have no name
	}
	assert.Equal(t, []config.Lookalike{
		{Var: "CHECK_TIMOUT", Like: "CHECK_TIMEOUT"},
		{Var: "DNS_TEST_DOMAIN", Like: "DNS_TEST_DOMAINS"},
		{Var: "RETRY_BACKOF_MAX", Like: "RETRY_BACKOFF_MAX"},
		{Var: "SETLE_TIME", Like: "SETTLE_TIME"},
		{Var: "check_timeout", Like: "CHECK_TIMEOUT"},
	}, config.Unknown(environ))
}

// TestInitialTimeoutDeprecated: INITIAL_TIMEOUT set to anything but its default
// brings a warning that says whether it has an effect with the other settings; it is
// still honoured (the failure is recorded after MAX_RETRIES rounds or INITIAL_TIMEOUT,
// whichever comes first).
func TestInitialTimeoutDeprecated(t *testing.T) {
	for _, tt := range []struct {
		env    map[string]string
		warned bool
		effect string
	}{
		{map[string]string{}, false, ""},
		{map[string]string{"INITIAL_TIMEOUT": "300s"}, false, ""}, // nodeready's ConfigMap and kube-node-ready's chart
		{map[string]string{"INITIAL_TIMEOUT": "5m"}, false, ""},
		{map[string]string{"INITIAL_TIMEOUT": "10m"}, true, "no effect here"},
		{map[string]string{"INITIAL_TIMEOUT": "30s"}, true, "may record the failure before MAX_RETRIES=5 rounds"},
		{map[string]string{"INITIAL_TIMEOUT": "10m", "MAX_RETRIES": "30"}, true, "may record the failure before MAX_RETRIES=30 rounds"},
	} {
		cfg, err := load(t, with(inPod, tt.env), false)
		require.NoError(t, err, "deprecated, still accepted")
		var got []config.Warning
		for _, w := range cfg.Warnings(nil) {
			if w.Var == "INITIAL_TIMEOUT" {
				got = append(got, w)
			}
		}
		if !tt.warned {
			assert.Empty(t, got, "%v", tt.env)
			continue
		}
		require.Len(t, got, 1, "%v", tt.env)
		assert.Contains(t, got[0].Hint, "deprecated")
		assert.Contains(t, got[0].Hint, tt.effect, "%v", tt.env)
	}
}

// TestRoundsTime: the longest time MAX_RETRIES rounds take, against which
// INITIAL_TIMEOUT is weighed: with the defaults, 5 rounds of at most 10s and the
// delays 1s, 2s, 4s and 8s with 10% jitter, 66.5s, long before 300s.
func TestRoundsTime(t *testing.T) {
	cfg := defaultConfig(t)
	assert.Equal(t, 66500*time.Millisecond, cfg.RoundsTime())
	assert.Less(t, cfg.RoundsTime(), cfg.InitialTimeout, "INITIAL_TIMEOUT takes no effect with the defaults")
	cfg, err := load(t, with(inPod, map[string]string{"RETRY_BACKOFF": "linear", "MAX_RETRIES": "3", "CHECK_TIMEOUT": "1s"}), false)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second+2*5500*time.Millisecond, cfg.RoundsTime(), "linear: 5s each")
}

// TestKubeNodeReadyConfigMapsBringNoLookalikes: the ConfigMaps of kube-node-ready's chart
// name only variables nodeready reads or refuses by name, so none is warned about as a
// lookalike.
func TestKubeNodeReadyConfigMapsBringNoLookalikes(t *testing.T) {
	for _, file := range []string{"kube-node-ready-default.yaml", "kube-node-ready-custom.yaml", "kube-node-ready-edited.yaml", "kube-node-ready-cluster-dns.yaml"} {
		_, data := loadConfigMap(t, file)
		var environ []string
		for k, v := range data {
			environ = append(environ, k+"="+v)
		}
		assert.Empty(t, config.Unknown(environ), file)
	}
}
