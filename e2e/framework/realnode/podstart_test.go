package realnode

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPodStart reads the steps of an agent pod's start from a joining real node's kubelet and
// containerd logs (testdata/podstart: the pod was bound before the node's CNI was ready, so its
// token volume first failed "not registered" and waited for the volume manager's retry).
func TestPodStart(t *testing.T) {
	n := &Node{opts: Options{Name: "real-node-3", LogDir: "testdata/podstart"}}
	s, err := n.PodStart("nodeready-d6pv4")
	require.NoError(t, err)
	at := func(clock string) time.Time {
		t.Helper()
		v, err := time.Parse("2006-01-02 15:04:05.000000", time.Now().UTC().Format("2006")+"-11-27 "+clock)
		require.NoError(t, err)
		return v
	}
	assert.Equal(t, PodStart{
		Added:        at("00:11:39.892989"),
		MountFailed:  at("00:11:40.017324"),
		Mounted:      at("00:11:43.638461"),
		SandboxStart: at("00:11:43.843584"),
		SandboxReady: at("00:11:44.467715"),
		PullStart:    at("00:11:44.471287"),
		Pulled:       at("00:11:45.438090"),
		Started:      at("00:11:46.032771"),
	}, truncate(s))

	_, err = n.PodStart("nodeready-other")
	assert.Error(t, err, "a pod the logs do not show")
}

// truncate cuts containerd's nanoseconds to the kubelet's microseconds, for comparison.
func truncate(s PodStart) PodStart {
	for _, p := range []*time.Time{&s.Added, &s.MountFailed, &s.Mounted, &s.SandboxStart, &s.SandboxReady, &s.PullStart, &s.Pulled, &s.Started} {
		*p = p.Truncate(time.Microsecond)
	}
	return s
}
