package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework/freeport"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/process"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
)

// clusterDNS is the scale runs' DNS server: CoreDNS, the cluster DNS of most clusters, in a
// process of its own, as it runs on nodes of its own in a cluster. An in-process server
// shared the saturated benchmark process with thousands of agents: its answers came late,
// so every agent's dns check resent its queries from new sockets (checks/dnshedge.go), which
// a real CoreDNS, answering in time, does not make them do, and ran the process out of
// open files.
type clusterDNS struct {
	addr, metricsAddr string
	proc              *process.Process
	dir               string // removed by stop when it is a temporary one
	temporary         bool
}

// startClusterDNS starts CoreDNS on loopback answering harness.DNSName with dnsAnswer, its
// log in logDir (a temporary directory when empty), and waits until it answers.
func startClusterDNS(ctx context.Context, logDir string) (*clusterDNS, error) {
	bin, err := realnode.CoreDNSBinary()
	if err != nil {
		return nil, err
	}
	d := &clusterDNS{dir: logDir}
	if d.dir == "" {
		if d.dir, err = os.MkdirTemp("", "nodeready-bench-coredns-"); err != nil {
			return nil, err
		}
		d.temporary = true
	} else if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freeport.Ports(2)
	if err != nil {
		d.stop()
		return nil, err
	}
	port := ports[0]
	d.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	d.metricsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	// hosts answers the one name; every other name of its zone is NXDOMAIN, as a cluster's
	// CoreDNS answers a name that does not exist.
	corefile := fmt.Sprintf(".:%d {\n  bind 127.0.0.1\n  hosts {\n    %s %s\n  }\n  prometheus %s\n  errors\n}\n",
		port, dnsAnswer, harness.DNSName, d.metricsAddr)
	path := filepath.Join(d.dir, "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o644); err != nil {
		d.stop()
		return nil, err
	}
	d.proc, err = process.Start(exec.Command(bin, "-conf", path), process.Options{Name: "coredns", LogPath: filepath.Join(d.dir, "coredns.log")})
	if err != nil {
		d.stop()
		return nil, err
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, network, d.addr)
	}}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if d.proc.Exited() {
			return false, d.proc.ExitError()
		}
		_, err := r.LookupHost(ctx, harness.DNSName)
		return err == nil, nil
	})
	if err != nil {
		d.stop()
		return nil, fmt.Errorf("coredns did not answer %s: %w\n%s", harness.DNSName, err, process.Tail(d.proc.LogPath, 10))
	}
	return d, nil
}

// queries returns how many queries CoreDNS has answered (coredns_dns_requests_total).
func (d *clusterDNS) queries(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	set, err := parseMetrics(body, "coredns_dns_requests_total")
	if err != nil {
		return 0, err
	}
	return set.sum("coredns_dns_requests_total"), nil
}

func (d *clusterDNS) stop() {
	if d.proc != nil {
		d.proc.Stop(5*time.Second, nil)
	}
	if d.temporary {
		_ = os.RemoveAll(d.dir)
	}
}
