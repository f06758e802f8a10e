package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/process"
)

// StartForTest starts a control plane for a test or benchmark and stops it at cleanup. The
// logs go to a temporary directory that is removed after a passing test and kept, with its
// path and the end of the API server log reported, after a failing one.
func StartForTest(t testing.TB) *ControlPlane {
	t.Helper()
	return StartForTestWith(t, Options{})
}

// StartForTestWith is StartForTest with extra options. An empty LogDir is filled in as
// StartForTest does; an empty BinDir as Start does.
func StartForTestWith(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	ownLogDir := opts.LogDir == ""
	if ownLogDir {
		dir, err := os.MkdirTemp("", "nodeready-e2e-logs-")
		if err != nil {
			t.Fatalf("create log dir: %v", err)
		}
		opts.LogDir = dir
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cp, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start control plane (logs in %s): %v", opts.LogDir, err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			cp.Stop()
			if ownLogDir {
				os.RemoveAll(opts.LogDir)
			}
			return
		}
		// Read the log before Stop, which would add the shutdown messages to its end.
		tail := process.Tail(filepath.Join(opts.LogDir, "kube-apiserver.log"), 40)
		cp.Stop()
		t.Logf("control plane logs kept in %s; last lines of kube-apiserver.log:\n%s", opts.LogDir, tail)
	})
	return cp
}

// ServiceAccountClientForTest returns a client that acts with PodToken's token of the
// ServiceAccount: bound to the pod, as the kubelet equips the pod's containers, or bound to
// nothing when pod is empty. A failure fails t.
func ServiceAccountClientForTest(t testing.TB, cp *ControlPlane, namespace, serviceAccount, pod string, uid types.UID) kubernetes.Interface {
	t.Helper()
	token, err := cp.PodToken(t.Context(), namespace, serviceAccount, pod, uid)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cp.TokenConfig(token))
	if err != nil {
		t.Fatalf("client for a token: %v", err)
	}
	return c
}
