package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// shippedDaemonSet reads manifests/03-daemonset.yaml.
func shippedDaemonSet(t *testing.T) appsv1.DaemonSet {
	t.Helper()
	f, err := os.Open("manifests/03-daemonset.yaml")
	require.NoError(t, err)
	defer f.Close()
	var ds appsv1.DaemonSet
	require.NoError(t, yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&ds))
	return ds
}

// shippedAgentContainer reads the agent container of manifests/03-daemonset.yaml.
func shippedAgentContainer(t *testing.T) corev1.Container {
	t.Helper()
	ds := shippedDaemonSet(t)
	require.Len(t, ds.Spec.Template.Spec.Containers, 1)
	return ds.Spec.Template.Spec.Containers[0]
}

// runProbe runs a probe of the agent container as a kubelet would, in a pod whose
// METRICS_PORT is set, and reports whether it passed. An exec probe runs the agent's own
// binary (the image's entrypoint, /nodeready) with the container's environment.
func runProbe(t *testing.T, c corev1.Container, pr *corev1.Probe) bool {
	t.Helper()
	require.NotNil(t, pr)
	switch {
	case pr.HTTPGet != nil:
		port := pr.HTTPGet.Port
		if port.Type == intstr.String {
			for _, cp := range c.Ports {
				if cp.Name == port.StrVal {
					port = intstr.FromInt32(cp.ContainerPort)
				}
			}
		}
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d%s", port.IntValue(), pr.HTTPGet.Path))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	case pr.Exec != nil:
		cmd := pr.Exec.Command
		require.Equal(t, "/nodeready", cmd[0], "an exec probe runs the agent's binary")
		var stdout, stderr bytes.Buffer
		client := &countingClient{}
		code := run(t.Context(), cmd[1:], &stdout, &stderr, client.new, time.Now())
		assert.Zero(t, client.calls, "a probe creates no Kubernetes client")
		return code == exitOK
	default:
		t.Fatalf("unsupported probe %+v", pr)
		return false
	}
}

// TestProbesFollowMetricsPort runs the shipped DaemonSet's probes against an agent whose
// METRICS_PORT is not the default: they must reach the port the agent listens on.
func TestProbesFollowMetricsPort(t *testing.T) {
	var paths []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		_, _ = w.Write([]byte("ok\n"))
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	require.NotEqual(t, "8080", port)
	cleanEnv(t, map[string]string{"METRICS_PORT": port})

	c := shippedAgentContainer(t)
	assert.True(t, runProbe(t, c, c.LivenessProbe), "liveness probe with METRICS_PORT=%s", port)
	assert.Equal(t, []string{"/healthz"}, paths)
	// No readiness probe: READY means the agent runs, and a held node's agent must not
	// fail a probe every period (manifests/03-daemonset.yaml).
	assert.Nil(t, c.ReadinessProbe)
}

func TestProbeCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "node not verified yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := strconv.Itoa(closed.Addr().(*net.TCPAddr).Port)
	require.NoError(t, closed.Close())

	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stderr string
	}{
		{"healthz passes", []string{"probe", "healthz"}, map[string]string{"METRICS_PORT": port}, exitOK, ""},
		{"readyz fails with the answer", []string{"probe", "readyz"}, map[string]string{"METRICS_PORT": port}, exitFailed, "503 Service Unavailable: node not verified yet"},
		{"nothing listening", []string{"probe", "healthz"}, map[string]string{"METRICS_PORT": closedPort}, exitFailed, "connection refused"},
		{"other settings are not read", []string{"probe", "healthz"}, map[string]string{"METRICS_PORT": port, "CHECKS": "ping"}, exitOK, ""},
		// The agent refuses these too (main_test), so the two never read one value two ways.
		{"a leading zero is refused", []string{"probe", "healthz"}, map[string]string{"METRICS_PORT": "0" + port}, exitConfig, "in decimal without leading zeros"},
		{"hex is refused", []string{"probe", "healthz"}, map[string]string{"METRICS_PORT": "0x1F90"}, exitConfig, "in decimal without leading zeros"},
		{"unknown endpoint", []string{"probe", "metrics"}, nil, exitConfig, "probe healthz|readyz"},
		{"no endpoint", []string{"probe"}, nil, exitConfig, "probe healthz|readyz"},
		{"bad port", []string{"probe", "healthz"}, map[string]string{"METRICS_PORT": "http"}, exitConfig, "METRICS_PORT="},
		{"port out of range", []string{"probe", "healthz"}, map[string]string{"METRICS_PORT": "65536"}, exitConfig, "METRICS_PORT="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t, tt.env)
			var stdout, stderr bytes.Buffer
			client := &countingClient{}
			assert.Equal(t, tt.code, run(t.Context(), tt.args, &stdout, &stderr, client.new, time.Now()), "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tt.stderr)
			assert.Empty(t, stdout.String())
			assert.Zero(t, client.calls)
		})
	}
}
