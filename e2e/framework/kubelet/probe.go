package kubelet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeClient sends probes as a kubelet does: a fresh connection each time, no redirects
// followed beyond the default.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// probe runs the container's readiness probe every readinessInterval (faster than the spec
// asks, so tests see the pod ready soon) and its liveness probe at the spec's period, until
// ctx ends. After failureThreshold failed liveness probes in a row it signals unhealthy and
// returns.
func (k *Kubelet) probe(ctx context.Context, p *pod, c *corev1.Container, proc *process, unhealthy chan<- struct{}) {
	readiness, liveness := c.ReadinessProbe, c.LivenessProbe
	var successes, failures, liveFailures int32
	nextLiveness := proc.Started.Add(seconds(liveness, func(pr *corev1.Probe) int32 { return pr.InitialDelaySeconds }, 0))

	t := time.NewTicker(readinessInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}

		ready := true
		if readiness != nil {
			if k.probeOnce(ctx, readiness, c, proc) {
				successes, failures = successes+1, 0
			} else {
				successes, failures = 0, failures+1
			}
			ready = p.isReady()
			switch {
			case successes >= threshold(readiness.SuccessThreshold, 1):
				ready = true
			case failures >= threshold(readiness.FailureThreshold, 3):
				ready = false
			}
		}
		if p.setReady(ready) {
			k.status.Add(p.uid)
		}

		if liveness == nil || time.Now().Before(nextLiveness) {
			continue
		}
		nextLiveness = time.Now().Add(seconds(liveness, func(pr *corev1.Probe) int32 { return pr.PeriodSeconds }, 10))
		if k.probeOnce(ctx, liveness, c, proc) {
			liveFailures = 0
			continue
		}
		if liveFailures++; liveFailures >= threshold(liveness.FailureThreshold, 3) {
			unhealthy <- struct{}{}
			return
		}
	}
}

// probeOnce runs one httpGet, tcpSocket or exec probe; other kinds fail. An exec probe runs
// its command as the container's own process does: the agent image's entrypoint is the
// agent binary, and the environment is the process's, METRICS_PORT included.
func (k *Kubelet) probeOnce(ctx context.Context, pr *corev1.Probe, c *corev1.Container, proc *process) bool {
	ctx, cancel := context.WithTimeout(ctx, seconds(pr, func(pr *corev1.Probe) int32 { return pr.TimeoutSeconds }, 1))
	defer cancel()
	switch {
	case pr.HTTPGet != nil:
		g := pr.HTTPGet
		host := g.Host
		if host == "" {
			host = NodeIP
		}
		scheme := strings.ToLower(string(g.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(probePort(g.Port, c, proc))), g.Path)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	case pr.TCPSocket != nil:
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(NodeIP, strconv.Itoa(probePort(pr.TCPSocket.Port, c, proc))))
		if err != nil {
			return false
		}
		conn.Close()
		return true
	case pr.Exec != nil:
		bin, args, err := k.commandLine(&corev1.Container{Name: c.Name, Image: c.Image, Command: pr.Exec.Command}, nil, nil)
		if err != nil {
			k.log.Warn("Exec probe cannot run", "container", c.Name, "error", err)
			return false
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.Dir = proc.Cmd.Env, proc.Cmd.Dir
		return cmd.Run() == nil
	default:
		k.log.Warn("Unsupported probe kind fails", "container", c.Name)
		return false
	}
}

// probePort resolves a probe's port, by number or by the name of a container port, to where
// the process really listens: the port the pod knows as METRICS_PORT is the process's own
// loopback port.
func probePort(port intstr.IntOrString, c *corev1.Container, proc *process) int {
	n := port.IntValue()
	if port.Type == intstr.String {
		for _, cp := range c.Ports {
			if cp.Name == port.StrVal {
				n = int(cp.ContainerPort)
			}
		}
	}
	if n == proc.containerPort {
		return proc.metricsPort
	}
	return n
}

// seconds reads a probe's duration field, with the API default when it is unset.
func seconds(pr *corev1.Probe, field func(*corev1.Probe) int32, def int32) time.Duration {
	v := def
	if pr != nil && field(pr) > 0 {
		v = field(pr)
	}
	return time.Duration(v) * time.Second
}

func threshold(v, def int32) int32 {
	if v > 0 {
		return v
	}
	return def
}

func (p *pod) isReady() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}
