// Package multinode runs a cluster of several real nodes on this machine (Linux, root): each
// node in namespaces of its own as in suites/realnode, joined by a bridge in an underlay
// namespace, pods networked by flanneld (VXLAN) across them.
package multinode_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework/realnode"
)

// startCluster starts the control plane and n real nodes, all started, none tainted; the logs
// are kept when the test fails.
func startCluster(t *testing.T, n int) *realnode.Cluster {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("real nodes need Linux and root")
	}
	logDir, err := os.MkdirTemp("", "nodeready-multinode-logs-")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	begin := time.Now()
	c, err := realnode.StartCluster(ctx, realnode.ClusterOptions{LogDir: logDir, Logf: t.Logf, Nodes: n, JoinedNodes: n})
	if err != nil {
		t.Fatalf("start cluster (logs in %s): %v", logDir, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.Kubectl(context.Background(), "get", "nodes,pods,events", "-A", "-o", "wide")
			t.Logf("cluster at failure:\n%s", out)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop real nodes: %v", err)
		}
		assert.Equal(t, c.MachineBefore(), c.MachineAfter(), "the machine as it was before the real nodes")
		if t.Failed() {
			t.Logf("logs kept in %s", logDir)
			return
		}
		os.RemoveAll(logDir)
	})
	t.Logf("Control plane, registry and images in %s", time.Since(begin).Round(time.Millisecond))
	for i := range n {
		if err := c.StartNodeAt(ctx, i); err != nil {
			t.Fatalf("logs in %s: %v", logDir, err)
		}
	}
	t.Logf("Cluster of %d nodes up in %s", n, time.Since(begin).Round(time.Millisecond))
	return c
}

// TestPodToPodAcrossNodes: a pod on node 1 asks a CoreDNS pod on node 2 a DNS query by the
// CoreDNS pod's IP, over flannel's VXLAN between the nodes' namespaces.
func TestPodToPodAcrossNodes(t *testing.T) {
	c := startCluster(t, 3)
	ctx := t.Context()
	client := c.CP.Client()
	server, err := client.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-on-node-2"},
		Spec: corev1.PodSpec{
			NodeName:           c.Nodes[2].Name(),
			ServiceAccountName: "coredns",
			DNSPolicy:          corev1.DNSDefault,
			Containers: []corev1.Container{{
				Name: "coredns", Image: c.Images.CoreDNS, Args: []string{"-conf", "/etc/coredns/Corefile"},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	sleeper, err := client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client-on-node-1"},
		Spec: corev1.PodSpec{
			NodeName:   c.Nodes[1].Name(),
			Containers: []corev1.Container{{Name: "pause", Image: c.Images.Pause}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	running := func(ns, name string) *corev1.Pod {
		var pod *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			pod = p
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
		})
		require.NoError(t, err, "pod %s/%s running with an IP: %+v", ns, name, pod)
		return pod
	}
	server = running("kube-system", server.Name)
	sleeper = running("default", sleeper.Name)
	t.Logf("server %s on %s, client %s on %s", server.Status.PodIP, server.Spec.NodeName, sleeper.Status.PodIP, sleeper.Spec.NodeName)
	sIP, cIP := netip.MustParseAddr(server.Status.PodIP), netip.MustParseAddr(sleeper.Status.PodIP)
	require.NotEqual(t, netip.PrefixFrom(sIP, 24).Masked(), netip.PrefixFrom(cIP, 24).Masked(), "the two pods in different nodes' pod CIDRs")

	pids := c.Nodes[1].PodPids(string(sleeper.UID))
	require.NotEmpty(t, pids, "the client pod's processes on node 1")
	var answer []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		answer, err = queryFromNetns(pids[0], net.JoinHostPort(server.Status.PodIP, "1053"), "kubernetes.default.svc.cluster.local.")
		if err != nil {
			t.Logf("query from the client pod: %v", err)
			return false, nil
		}
		return true, nil
	})
	require.NoError(t, err, "a DNS answer from the pod on node 2 to the pod on node 1")
	assert.Equal(t, []string{"10.96.0.1"}, answer)
}

// queryFromNetns asks the DNS server at addr (TCP) for name's A records from a socket made in
// the network namespace of pid: the thread that makes it enters that namespace and is thrown
// away after (it stays locked), the socket stays in the namespace it was made in.
func queryFromNetns(pid int, addr, name string) ([]string, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
		ch <- result{conn, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	defer r.conn.Close()
	_ = r.conn.SetDeadline(time.Now().Add(3 * time.Second))
	q, err := (&dnsmessage.Message{
		Header:    dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}).Pack()
	if err != nil {
		return nil, err
	}
	if _, err := r.conn.Write(append([]byte{byte(len(q) >> 8), byte(len(q))}, q...)); err != nil {
		return nil, err
	}
	var size [2]byte
	if _, err := readFull(r.conn, size[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, int(size[0])<<8|int(size[1]))
	if _, err := readFull(r.conn, buf); err != nil {
		return nil, err
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range m.Answers {
		if rr, ok := a.Body.(*dnsmessage.AResource); ok {
			out = append(out, netip.AddrFrom4(rr.A).String())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no A record in the answer: %+v", m.Header)
	}
	return out, nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
