package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nodeready/nodeready/internal/config"
)

// probeTimeout stays below the probes' timeoutSeconds in 03-daemonset.yaml, so a slow
// answer is reported by the probe, not cut off by the kubelet.
const probeTimeout = time.Second

// probe is the DaemonSet's liveness and readiness probe: `nodeready probe healthz|readyz`
// GETs that endpoint of the agent in the same container, at 127.0.0.1:$METRICS_PORT. An
// exec probe runs with the container's environment, so the probes follow METRICS_PORT
// wherever the ConfigMap sets it, which an httpGet probe's fixed port cannot. It reads
// METRICS_PORT only: a probe must not fail because of another setting.
func probe(args []string, stderr io.Writer) int {
	if len(args) != 1 || (args[0] != "healthz" && args[0] != "readyz") {
		fmt.Fprintln(stderr, "Usage: nodeready probe healthz|readyz")
		return exitConfig
	}
	port, err := config.MetricsPort()
	if err != nil {
		fmt.Fprintf(stderr, "nodeready: %v\n", err)
		return exitConfig
	}
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/" + args[0]
	resp, err := (&http.Client{Timeout: probeTimeout}).Get(url)
	if err != nil {
		fmt.Fprintf(stderr, "nodeready: probe %v\n", err)
		return exitFailed
	}
	defer resp.Body.Close()
	// The kubelet's httpGet rule: 2xx and 3xx pass.
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return exitOK
	}
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 256)).ReadString('\n')
	fmt.Fprintf(stderr, "nodeready: probe GET %s: %s: %s\n", url, resp.Status, strings.TrimSpace(line))
	return exitFailed
}
