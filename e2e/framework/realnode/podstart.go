package realnode

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// PodStart is when the node's kubelet and containerd did each step of starting a pod, read
// from their own logs: finer than the API's view, where the kubelet's Events arrive late.
type PodStart struct {
	Added        time.Time // the kubelet's SyncLoop ADD
	MountFailed  time.Time // the first failed mount of its token volume ("not registered"), or zero
	Mounted      time.Time // its token volume (the DaemonSet's api-token, or kube-api-access) mounted
	SandboxStart time.Time // containerd's RunPodSandbox
	SandboxReady time.Time // RunPodSandbox returned
	PullStart    time.Time // PullImage of the first image after the sandbox
	Pulled       time.Time // PullImage returned
	Started      time.Time // StartContainer returned
}

// PodStart reads the node's kubelet and containerd logs for pod (its name, in any namespace).
func (n *Node) PodStart(pod string) (PodStart, error) {
	var s PodStart
	err := scanLog(filepath.Join(n.opts.LogDir, "kubelet.log"), klogTime, func(at time.Time, line string) {
		if !strings.Contains(line, pod) {
			return
		}
		switch {
		case strings.Contains(line, `"SyncLoop ADD"`):
			setFirst(&s.Added, at)
		case strings.Contains(line, "kube-root-ca.crt") && strings.Contains(line, "not registered"):
			setFirst(&s.MountFailed, at)
		case strings.Contains(line, "MountVolume.SetUp succeeded") && isTokenVolume(line):
			setFirst(&s.Mounted, at)
		}
	})
	if err != nil {
		return s, err
	}
	sandbox, container := "", ""
	err = scanLog(filepath.Join(n.opts.LogDir, "containerd.log"), logrusTime, func(at time.Time, line string) {
		switch {
		case strings.Contains(line, "msg=\"RunPodSandbox for name:\\\""+pod+"\\\"") && !strings.Contains(line, "returns"):
			setFirst(&s.SandboxStart, at)
		case sandbox == "" && strings.Contains(line, "RunPodSandbox for name:\\\""+pod+"\\\"") && strings.Contains(line, "returns sandbox id"):
			s.SandboxReady, sandbox = at, quoted(line, "returns sandbox id")
		case sandbox != "" && s.PullStart.IsZero() && strings.Contains(line, `msg="PullImage `) && !strings.Contains(line, "returns"):
			s.PullStart = at
		case sandbox != "" && s.Pulled.IsZero() && strings.Contains(line, `msg="PullImage `) && strings.Contains(line, "returns image reference"):
			s.Pulled = at
		case sandbox != "" && container == "" && strings.Contains(line, "CreateContainer within sandbox \\\""+sandbox) && strings.Contains(line, "returns container id"):
			container = quoted(line, "returns container id")
		case container != "" && strings.Contains(line, "StartContainer for \\\""+container) && strings.Contains(line, "returns successfully"):
			setFirst(&s.Started, at)
		}
	})
	if err == nil && (s.Added.IsZero() || s.Mounted.IsZero() || s.SandboxReady.IsZero() || s.Started.IsZero()) {
		err = fmt.Errorf("pod %s: not every step in the logs of %s: %+v", pod, n.Name(), s)
	}
	return s, err
}

// isTokenVolume reports whether a kubelet line is about a pod's token volume: the agent's
// api-token (manifests/03-daemonset.yaml), or the kube-api-access-* volume the ServiceAccount
// admission plugin adds to other pods.
func isTokenVolume(line string) bool {
	return strings.Contains(line, `volume \"api-token\"`) || strings.Contains(line, `volume \"kube-api-access`)
}

// klogTime reads the time of a kubelet (klog) line: I1127 00:11:39.892989   31913 kubelet.go:2709]
// ...; the year is not in the line.
func klogTime(line string) (time.Time, bool) {
	m := klogStamp.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}, false
	}
	at, err := time.Parse("2006 0102 15:04:05.000000", fmt.Sprintf("%d %s", time.Now().UTC().Year(), m[1]))
	return at, err == nil
}

// logrusTime reads the time of a containerd (logrus) line: time="2026-11-27T00:11:43.843584727Z" ...
func logrusTime(line string) (time.Time, bool) {
	m := logrusStamp.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	return at, err == nil
}

var (
	klogStamp   = regexp.MustCompile(`^[IWE](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})`)
	logrusStamp = regexp.MustCompile(`^time="([^"]+)"`)
)

// scanLog calls f with the time and text of every line of path whose time stamp reads.
func scanLog(path string, stamp func(string) (time.Time, bool), f func(time.Time, string)) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if at, ok := stamp(sc.Text()); ok {
			f(at, sc.Text())
		}
	}
	return sc.Err()
}

func setFirst(t *time.Time, at time.Time) {
	if t.IsZero() {
		*t = at
	}
}

// quoted is the escaped-quoted word that follows after in line: returns sandbox id \"abc\".
func quoted(line, after string) string {
	_, rest, ok := strings.Cut(line, after+` \"`)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, `\"`)
	return id
}
