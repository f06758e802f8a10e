package checks_test

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// endpointSlice returns a slice of service in namespace "default" with the
// given ports and endpoints.
func endpointSlice(name, service string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: "default",
			Labels:    map[string]string{discoveryv1.LabelServiceName: service},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

func endpoint(addr string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

// tcpPort is the EndpointPort of addr's port; protocol nil means TCP.
func tcpPort(t *testing.T, addr string, protocol *corev1.Protocol) discoveryv1.EndpointPort {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.ParseInt(p, 10, 32)
	require.NoError(t, err)
	return discoveryv1.EndpointPort{Name: new("p" + p), Port: new(int32(n)), Protocol: protocol}
}

func TestEndpoints(t *testing.T) {
	live, closed := listen(t), closedAddr(t)
	livePorts := []discoveryv1.EndpointPort{tcpPort(t, live, nil)}
	closedPorts := []discoveryv1.EndpointPort{tcpPort(t, closed, new(corev1.ProtocolTCP))}
	udpFirst := []discoveryv1.EndpointPort{tcpPort(t, closed, new(corev1.ProtocolUDP)), tcpPort(t, live, new(corev1.ProtocolTCP))}
	ready, notReady := new(true), new(false)

	tests := []struct {
		name    string
		objects []runtime.Object
		connect bool
		wantErr string
	}{
		{
			name:    "ready endpoint",
			objects: []runtime.Object{endpointSlice("web-a", "web", livePorts, endpoint("10.0.0.1", notReady), endpoint("10.0.0.2", ready))},
		},
		{
			name:    "nil Ready counts as ready",
			objects: []runtime.Object{endpointSlice("web-a", "web", livePorts, endpoint("10.0.0.1", nil))},
		},
		{
			name:    "not ready only",
			objects: []runtime.Object{endpointSlice("web-a", "web", livePorts, endpoint("10.0.0.1", notReady))},
			wantErr: "no ready endpoints in 1 EndpointSlice of default/web",
		},
		{
			name: "not ready in every slice",
			objects: []runtime.Object{
				endpointSlice("web-a", "web", livePorts, endpoint("10.0.0.1", notReady)),
				endpointSlice("web-b", "web", livePorts),
			},
			wantErr: "no ready endpoints in 2 EndpointSlices of default/web",
		},
		{
			name:    "no slices",
			wantErr: "no EndpointSlices for default/web",
		},
		{
			name: "slices of another service or namespace are ignored",
			objects: []runtime.Object{
				endpointSlice("db-a", "db", livePorts, endpoint("10.0.0.1", ready)),
				func() runtime.Object {
					s := endpointSlice("web-a", "web", livePorts, endpoint("10.0.0.1", ready))
					s.Namespace = "other"
					return s
				}(),
			},
			wantErr: "no EndpointSlices for default/web",
		},
		{
			name:    "connect to a live backend",
			objects: []runtime.Object{endpointSlice("web-a", "web", livePorts, endpoint("127.0.0.1", ready))},
			connect: true,
		},
		{
			name:    "connect refused",
			objects: []runtime.Object{endpointSlice("web-a", "web", closedPorts, endpoint("127.0.0.1", ready))},
			connect: true,
			wantErr: fmt.Sprintf("connect to endpoint of default/web: dial tcp %s: connect: connection refused", closed),
		},
		{
			name:    "connect uses the first TCP port",
			objects: []runtime.Object{endpointSlice("web-a", "web", udpFirst, endpoint("127.0.0.1", ready))},
			connect: true,
		},
		{
			name: "connect skips not-ready endpoints",
			objects: []runtime.Object{
				endpointSlice("web-a", "web", closedPorts, endpoint("127.0.0.1", notReady)),
				endpointSlice("web-b", "web", livePorts, endpoint("127.0.0.1", ready)),
			},
			connect: true,
		},
		{
			name:    "connect without a TCP port",
			objects: []runtime.Object{endpointSlice("web-a", "web", nil, endpoint("127.0.0.1", ready))},
			connect: true,
			wantErr: "connect to a ready endpoint of default/web: no ready endpoint with a TCP port",
		},
		{
			name:    "no port is fine without connect",
			objects: []runtime.Object{endpointSlice("web-a", "web", nil, endpoint("127.0.0.1", ready))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			c := checks.NewEndpoints(adapt.Clientset(client), "default", "web", tt.connect, nil)
			requireIdentity(t, c, "endpoints", "default/web")

			assertErr(t, checks.Execute(t.Context(), c, runTimeout).Err, tt.wantErr)
			list, ok := onlyAction(t, client).(k8stesting.ListAction)
			require.True(t, ok)
			assert.Equal(t, "endpointslices", list.GetResource().Resource)
			assert.Equal(t, "default", list.GetNamespace())
			assert.Equal(t, "kubernetes.io/service-name=web", list.GetListRestrictions().Labels.String())
		})
	}
}

func TestEndpointsConnectIPv6(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	s := endpointSlice("web-a", "web", []discoveryv1.EndpointPort{tcpPort(t, acceptAll(t, ln), nil)}, endpoint("::1", new(true)))
	s.AddressType = discoveryv1.AddressTypeIPv6
	c := checks.NewEndpoints(adapt.Clientset(fake.NewClientset(s)), "default", "web", true, nil)

	res := checks.Execute(t.Context(), c, runTimeout)

	assert.NoError(t, res.Err)
}

func TestEndpointsForbidden(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "endpointslices", forbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}))

	res := checks.Execute(t.Context(), checks.NewEndpoints(adapt.Clientset(client), "default", "web", false, nil), time.Second)

	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "list EndpointSlices of default/web: forbidden, check the agent's RBAC")
}

// The list is served from the API server's watch cache, not a consistent read.
func TestEndpointsListFromWatchCache(t *testing.T) {
	client := fake.NewClientset(endpointSlice("s", "svc", nil, endpoint("192.0.2.1", new(true))))
	require.NoError(t, checks.NewEndpoints(adapt.Clientset(client), "default", "svc", false, nil).Run(t.Context()))
	var lists []k8stesting.ListAction
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok {
			lists = append(lists, l)
		}
	}
	require.Len(t, lists, 1)
	assert.Equal(t, "0", lists[0].(k8stesting.ListActionImpl).ListOptions.ResourceVersion)
}
