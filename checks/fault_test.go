package checks_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// TestWhoseFault walks every kind of check through its error paths and asserts whose
// fault each is: the node's ("fail"), which may hold the node and bring on the failure
// action; the cluster's or the configuration's ("misconfigured"), which never does; or
// not applicable ("skip"). Each row makes its fault real first (a closed port, a server
// that answers 500, an object that is not there).
func TestWhoseFault(t *testing.T) {
	closed := closedAddr(t)
	node := newNode()
	covered := map[checks.Name]bool{}
	defer func() {
		for _, name := range checks.Names() {
			assert.True(t, covered[name], "no error path of %s is judged here", name)
		}
	}()
	for _, tt := range []struct {
		kind, path string
		check      func(t *testing.T) checks.Check
		want       string
	}{
		{"dns", "the name does not resolve", func(t *testing.T) checks.Check {
			srv := startDNS(t, false)
			srv.SetBroken(true)
			return checks.NewDNS("svc.nodeready.test.", checks.NewResolver(srv.Addr()))
		}, "fail"},
		{"dns", "no cluster DNS runs anywhere", func(t *testing.T) checks.Check {
			return checks.NewUnlessNoClusterDNS(stubDNS{errors.New("i/o timeout")}, adapt.Clientset(fake.NewClientset(kubeDNSSlice(endpoint("10.244.0.2", new(false))))), kubeDNS)
		}, "skip"},
		{"tcp", "the connection is refused", func(*testing.T) checks.Check { return checks.NewTCP(closed, nil) }, "fail"},
		{"http", "the connection is refused", func(*testing.T) checks.Check {
			return checks.NewHTTP("http://"+closed+"/", checks.StatusMatcher{}, nil)
		}, "fail"},
		{"http", "an unexpected status", func(t *testing.T) checks.Check {
			return checks.NewHTTP(serve(t, http.StatusServiceUnavailable).URL, checks.StatusMatcher{}, nil)
		}, "fail"},
		{"http", "a certificate no CA of the configuration signed", func(t *testing.T) checks.Check {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			t.Cleanup(srv.Close)
			return checks.NewHTTP(srv.URL, checks.StatusMatcher{}, nil)
		}, "misconfigured"},
		{"http", "a certificate not yet valid by this node's clock, valid by the API server's", func(t *testing.T) checks.Check {
			url, caFile := tlsServer(t, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
			client, err := checks.NewHTTPClient(caFile)
			require.NoError(t, err)
			api := newDateServer(t, 90*time.Minute, 0)
			api.getNode(t)
			return checks.NewHTTP(url, checks.StatusMatcher{}, client).WithClock(kube.ClockOf(api.client))
		}, "fail"},
		{"apiserver", "no answer", func(t *testing.T) checks.Check {
			return checks.NewAPIServer(restClient(t, "http://"+closed), checks.APIServerReadyz, "node-a")
		}, "fail"},
		{"apiserver", "the API server says it is not ready", func(t *testing.T) checks.Check {
			return checks.NewAPIServer(restClient(t, serve(t, http.StatusInternalServerError).URL), checks.APIServerReadyz, "node-a")
		}, "misconfigured"},
		{"apiserver", "refused", func(t *testing.T) checks.Check {
			return checks.NewAPIServer(restClient(t, serve(t, http.StatusForbidden).URL), checks.APIServerReadyz, "node-a")
		}, "misconfigured"},
		{"apiserver", "NODE_NAME names no node", func(*testing.T) checks.Check {
			return checks.NewAPIServer(adapt.Clientset(fake.NewClientset()), checks.APIServerNode, "node-a")
		}, "misconfigured"},
		{"clock", "this node's clock is an hour behind the API server's", func(t *testing.T) checks.Check {
			srv := newDateServer(t, time.Hour, 0)
			return srv.check(5 * time.Second)
		}, "fail"},
		{"clock", "no answer", func(t *testing.T) checks.Check {
			c := restClient(t, "http://"+closed)
			return checks.NewClock(c, kube.ClockOf(c), 5*time.Second)
		}, "fail"},
		{"networkpolicy", "the kubelet, which the canary policy blocks, answers while another node enforces it", func(t *testing.T) checks.Check {
			apiServer, _ := acceptCounting(t)
			kubelet, _ := acceptCounting(t)
			cs := fake.NewClientset(policyForPort(portOf(t, kubelet)), kubeletNode("127.0.0.1", portOf(t, kubelet)))
			return checks.NewNetworkPolicy(adapt.Clientset(cs), "n1", canaryName, checks.APIServerEndpoint{Addr: apiServer},
				func(context.Context) (bool, error) { return true, nil })
		}, "fail"},
		{"networkpolicy", "the canary policy is missing", func(t *testing.T) checks.Check {
			apiServer, _ := acceptCounting(t)
			cs := fake.NewClientset(kubeletNode("127.0.0.1", 10250))
			return checks.NewNetworkPolicy(adapt.Clientset(cs), "n1", canaryName, checks.APIServerEndpoint{Addr: apiServer}, nil)
		}, "misconfigured"},
		{"networkpolicy", "no node of the configuration enforces it (no engine)", func(t *testing.T) checks.Check {
			apiServer, _ := acceptCounting(t)
			kubelet, _ := acceptCounting(t)
			cs := fake.NewClientset(policyForPort(portOf(t, kubelet)), kubeletNode("127.0.0.1", portOf(t, kubelet)))
			return checks.NewNetworkPolicy(adapt.Clientset(cs), "n1", canaryName, checks.APIServerEndpoint{Addr: apiServer},
				func(context.Context) (bool, error) { return false, nil })
		}, "misconfigured"},
		{"endpoints", "the Service has no EndpointSlices", func(*testing.T) checks.Check {
			return checks.NewEndpoints(adapt.Clientset(fake.NewClientset()), "default", "web", true, nil)
		}, "misconfigured"},
		{"endpoints", "no ready endpoint anywhere", func(*testing.T) checks.Check {
			return checks.NewEndpoints(adapt.Clientset(fake.NewClientset(webSlice(false, "10.244.1.2"))), "default", "web", true, nil)
		}, "misconfigured"},
		{"endpoints", "the ready endpoint cannot be reached from here", func(*testing.T) checks.Check {
			host, port, _ := net.SplitHostPort(closed)
			s := webSlice(true, host)
			p, _ := strconv.Atoi(port)
			s.Ports[0].Port = new(int32(p))
			return checks.NewEndpoints(adapt.Clientset(fake.NewClientset(s)), "default", "web", true, nil)
		}, "fail"},
		{"endpoints", "refused", func(*testing.T) checks.Check {
			c := fake.NewClientset()
			c.PrependReactor("list", "endpointslices", forbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}))
			return checks.NewEndpoints(adapt.Clientset(c), "default", "web", true, nil)
		}, "misconfigured"},
		{"podnetwork", "refused", func(*testing.T) checks.Check {
			c := fake.NewClientset()
			c.PrependReactor("list", "endpointslices", forbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}))
			return checks.NewPodNetwork(adapt.Clientset(c), "node-self", kubeDNS, 3, checks.PodProbe{FullSize: fullSize(1450)})
		}, "misconfigured"},
		{"podnetwork", "POD_NETWORK_SERVICE names no Service", func(*testing.T) checks.Check {
			return checks.NewPodNetwork(adapt.Clientset(fake.NewClientset()), "node-self", kubeDNS, 3, checks.PodProbe{FullSize: fullSize(1450)})
		}, "misconfigured"},
		{"podnetwork", "its ready endpoints do not name their node", func(t *testing.T) checks.Check {
			s := podSlice(t, "a1", closed, "node-a1", "", corev1.ProtocolTCP)
			s.Endpoints[0].NodeName = nil
			return checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(s)), "node-self", kubeDNS, 3, checks.PodProbe{FullSize: fullSize(1450)})
		}, "misconfigured"},
		{"podnetwork", "full-size packets lost while small ones cross", func(t *testing.T) checks.Check {
			c := fake.NewClientset(podSlice(t, "a1", dnsPod(t).Addr(), "node-a1", "", corev1.ProtocolUDP))
			return checks.NewPodNetwork(adapt.Clientset(c), "node-self", kubeDNS, 3, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSizeErr(checks.ErrFullSizeLost)})
		}, "fail"},
		{"podnetwork", "the pod on another node cannot be reached", func(t *testing.T) checks.Check {
			c := fake.NewClientset(podSlice(t, "a1", closed, "node-a1", "", corev1.ProtocolTCP))
			return checks.NewPodNetwork(adapt.Clientset(c), "node-self", kubeDNS, 3, checks.PodProbe{FullSize: fullSize(1450)})
		}, "fail"},
		{"daemonsets", "a named DaemonSet does not exist", func(*testing.T) checks.Check {
			want := dsOptions()
			want.Names = []string{"kube-system/cilium"}
			return checks.NewDaemonSets(adapt.Clientset(fake.NewClientset(newNode())), "node-a", want)
		}, "misconfigured"},
		{"daemonsets", "its pod is not ready on the node", func(*testing.T) checks.Check {
			ds := daemonSet("cilium", nil)
			return checks.NewDaemonSets(adapt.Clientset(fake.NewClientset(newNode(), ds, daemonPod(ds, "cilium-x", "node-a", corev1.PodRunning, false))), "node-a", dsOptions())
		}, "fail"},
		{"conditions", "the node does not report it", func(t *testing.T) checks.Check {
			return checks.NewNodeCondition(adapt.Clientset(fake.NewClientset(node)), "node-a", mustParse(t, checks.ParseConditionWant, "example.com/GPUHealthy=True"))
		}, "fail"},
		{"conditions", "NODE_NAME names no node", func(t *testing.T) checks.Check {
			return checks.NewNodeCondition(adapt.Clientset(fake.NewClientset()), "node-a", mustParse(t, checks.ParseConditionWant, "Ready=True"))
		}, "misconfigured"},
		{"resources", "below the minimum", func(t *testing.T) checks.Check {
			return checks.NewResource(adapt.Clientset(fake.NewClientset(node)), "node-a", mustParse(t, checks.ParseResourceMinimum, "nvidia.com/gpu>=1"))
		}, "fail"},
		{"csi", "not registered yet", func(*testing.T) checks.Check {
			return checks.NewCSIDriver(adapt.Clientset(fake.NewClientset(&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})), "node-a", "ebs.csi.aws.com", true)
		}, "fail"},
		{"csi", "refused", func(*testing.T) checks.Check {
			c := fake.NewClientset()
			c.PrependReactor("get", "csinodes", forbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}))
			return checks.NewCSIDriver(adapt.Clientset(c), "node-a", "ebs.csi.aws.com", true)
		}, "misconfigured"},
		{"dra", "the API server serves no resource.k8s.io", func(t *testing.T) checks.Check { return newDRA(t, draClient(nil), draDriver+">=1") }, "misconfigured"},
		{"dra", "the driver published nothing", func(t *testing.T) checks.Check { return newDRA(t, draClient([]string{"v1"}), draDriver+">=1") }, "fail"},
		{"command", "the program is not in the image", func(*testing.T) checks.Check { return checks.NewCommand("/nonexistent/warmup.sh", nil) }, "misconfigured"},
		{"command", "the program fails", func(*testing.T) checks.Check { return checks.NewCommand("/bin/false", nil) }, "fail"},
		{"command", "the node is out of processes to start it", func(*testing.T) checks.Check {
			return checks.NewCommandStartedBy("/bin/true", nil, func(cmd *exec.Cmd) error {
				return &os.PathError{Op: "fork/exec", Path: cmd.Path, Err: syscall.EAGAIN}
			})
		}, "fail"},
		{"daemonsets", "a named DaemonSet runs only on nodes with a label this node lacks", func(*testing.T) checks.Check {
			want := dsOptions()
			want.Names = []string{"kube-system/device-plugin"}
			ds := daemonSet("device-plugin", func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector = map[string]string{"nvidia.com/gpu.present": "true"}
			})
			return checks.NewDaemonSets(adapt.Clientset(fake.NewClientset(newNode(), ds)), "node-a", want)
		}, "fail"},
	} {
		covered[checks.Name(tt.kind)] = true
		t.Run(tt.kind+": "+tt.path, func(t *testing.T) {
			res := checks.Execute(t.Context(), tt.check(t), runTimeout)
			require.Error(t, res.Err, "the fault is real")
			assert.Equal(t, tt.want, res.Status(), "%v", res.Err)
		})
	}
}

// serve is a server that answers every request with status.
func serve(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	t.Cleanup(srv.Close)
	return srv
}

// restClient is a client of the API server at host.
func restClient(t *testing.T, host string) kube.Interface {
	t.Helper()
	c, err := kube.NewForConfig(&rest.Config{Host: host})
	require.NoError(t, err)
	return c
}

// webSlice is an EndpointSlice of default/web with one endpoint at addr on port 80.
func webSlice(ready bool, addr string) *discoveryv1.EndpointSlice {
	return endpointSlice("web-1", "web", []discoveryv1.EndpointPort{{Port: new(int32(80))}}, endpoint(addr, new(ready)))
}
