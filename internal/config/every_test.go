package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
)

// TestEveryBadVariableAtOnce: a configuration with several mistakes is refused with
// every one of them named, the agent's own (one that does not parse, one that does
// not validate), kube-node-ready's and a check's; one mistake brings no refusal of
// another variable.
func TestEveryBadVariableAtOnce(t *testing.T) {
	_, err := load(t, with(inPod, map[string]string{
		"TAINT_EFFECT":       "Sometimes",
		"MAX_RETRIES":        "many",
		"RETRY_BACKOFF_BASE": "0s",
		"KLOG_VERBOSITY":     "4",
		"CLUSTER_DNS_IP":     "10.96.0.10",
		"DNS_TEST_DOMAINS":   "bad_name!.com",
		"METRICS_PORT":       "http",
	}), false)
	var errs config.Errors
	require.ErrorAs(t, err, &errs)
	var names []string
	for _, e := range errs {
		names = append(names, e.Var)
	}
	assert.Equal(t, []string{
		"MAX_RETRIES", "METRICS_PORT", // read: envconfig, in the order of the fields
		"CLUSTER_DNS_IP", "KLOG_VERBOSITY", // kube-node-ready's
		"TAINT_EFFECT", "RETRY_BACKOFF_BASE", // validated
		"DNS_TEST_DOMAINS", // the dns check's
	}, names)

	var first *config.Error
	require.ErrorAs(t, err, &first, "errors.As finds one")
	assert.Equal(t, "MAX_RETRIES", first.Var)
}
