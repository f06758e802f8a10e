package realnode

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlannelCNIConfig: the conflist follows flanneld's subnet.env as the flannel CNI plugin's
// delegation to the bridge plugin would: one host-local range and route per family that
// flanneld wrote, IPv4 first, and masquerading left to flanneld when it does it.
func TestFlannelCNIConfig(t *testing.T) {
	const v4 = "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"
	type ipam struct {
		Ranges [][]struct{ Subnet string } `json:"ranges"`
		Routes []struct{ Dst string }      `json:"routes"`
	}
	parse := func(t *testing.T, env string) (ipam, bool) {
		conf, err := flannelCNIConfig(env)
		require.NoError(t, err)
		var list struct {
			Plugins []struct {
				IPMasq bool `json:"ipMasq"`
				MTU    int  `json:"mtu"`
				IPAM   ipam `json:"ipam"`
			} `json:"plugins"`
		}
		require.NoError(t, json.Unmarshal([]byte(conf), &list), conf)
		require.Len(t, list.Plugins, 1)
		assert.Equal(t, 1450, list.Plugins[0].MTU)
		return list.Plugins[0].IPAM, list.Plugins[0].IPMasq
	}

	got, masq := parse(t, v4)
	assert.False(t, masq, "flanneld masquerades (FLANNEL_IPMASQ=true)")
	require.Len(t, got.Ranges, 1)
	assert.Equal(t, "10.244.1.0/24", got.Ranges[0][0].Subnet)
	require.Len(t, got.Routes, 1)
	assert.Equal(t, "10.244.0.0/16", got.Routes[0].Dst)

	got, _ = parse(t, v4+"FLANNEL_IPV6_NETWORK=fd00:10:244::/56\nFLANNEL_IPV6_SUBNET=fd00:10:244:1::1/64\n")
	require.Len(t, got.Ranges, 2)
	assert.Equal(t, "10.244.1.0/24", got.Ranges[0][0].Subnet)
	assert.Equal(t, "fd00:10:244:1::/64", got.Ranges[1][0].Subnet)
	require.Len(t, got.Routes, 2)
	assert.Equal(t, "fd00:10:244::/56", got.Routes[1].Dst)

	_, err := flannelCNIConfig("FLANNEL_NETWORK=10.244.0.0/16\n")
	assert.ErrorContains(t, err, "FLANNEL_SUBNET")
}
