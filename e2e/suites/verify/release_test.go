package verify

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/chart"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// releaseRegistry and releaseRepo are where the release lives, and what its files name.
const (
	releaseRegistry = "ghcr.io"
	releaseRepo     = "nodeready/nodeready"
)

// testRelease builds the release with `make release`, as the release workflow does, pushes it
// to the cluster's registry, which the node's containerd mirrors ghcr.io from, and installs
// each artefact as docs/install.md tells users: `kubectl apply -f install.yaml`, then (that
// removed) `helm install` of the chart from its OCI repository, then the kubectl plugin from
// its archive. Each install releases the node, and the agent pod ran the image by the digest
// the release names, pulled by containerd.
func testRelease(t *testing.T, c *realnode.Cluster, pods *podLog) {
	root := framework.RepoRoot(t)
	versionFile, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	version := strings.TrimSpace(string(versionFile))
	dist := filepath.Join(t.TempDir(), "dist")
	makeRelease(t, root, version, dist)

	b, err := os.ReadFile(filepath.Join(dist, "image.digest"))
	require.NoError(t, err)
	digest := strings.TrimSpace(string(b))
	image := releaseRegistry + "/" + releaseRepo + "@" + digest
	checkSums(t, dist)

	// The release in the registry, as `make release REGISTRY=...` pushes it: the image index
	// from its OCI layout, the chart with helm push.
	p, err := layout.FromPath(filepath.Join(dist, "image-oci"))
	require.NoError(t, err)
	outer, err := p.ImageIndex()
	require.NoError(t, err)
	m, err := outer.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 1)
	require.Equal(t, digest, m.Manifests[0].Digest.String(), "image.digest is the layout's index")
	idx, err := outer.ImageIndex(m.Manifests[0].Digest)
	require.NoError(t, err)
	_, err = c.Registry.PushIndex(t.Context(), releaseRepo+":"+version, idx)
	require.NoError(t, err)
	chartVersion := strings.TrimPrefix(version, "v")
	_, err = chart.RunHelm(t, "push", filepath.Join(dist, "nodeready-"+chartVersion+".tgz"), "oci://"+c.Registry.Host+"/nodeready/charts", "--plain-http")
	require.NoError(t, err)
	require.NoError(t, c.Mirror(releaseRegistry))

	// What was installed before goes, as a user would start.
	_, err = c.Kubectl(t.Context(), "delete", "-f", filepath.Join(root, "manifests"), "--ignore-not-found", "--wait")
	require.NoError(t, err)

	t.Run("kubectl apply -f install.yaml", func(t *testing.T) {
		installed, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
		require.NoError(t, err)
		assert.Contains(t, string(installed), "image: "+image, "install.yaml names the image by digest")
		_, err = c.Kubectl(t.Context(), "apply", "-f", filepath.Join(dist, "install.yaml"))
		require.NoError(t, err)
		releasedBy(t, c, pods, image, digest)
		_, err = c.Kubectl(t.Context(), "delete", "-f", filepath.Join(dist, "install.yaml"), "--wait")
		require.NoError(t, err)
	})

	t.Run("helm install oci://", func(t *testing.T) {
		_, err := chart.RunHelm(t, "install", "nodeready", "oci://"+c.Registry.Host+"/nodeready/charts/nodeready", "--version", chartVersion,
			"--plain-http", "--namespace", "kube-system", "--kubeconfig", c.CP.Kubeconfig())
		require.NoError(t, err)
		releasedBy(t, c, pods, image, digest)
	})

	t.Run("the kubectl plugin from its archive", func(t *testing.T) {
		dir := t.TempDir()
		bin := unpack(t, filepath.Join(dist, "kubectl-nodeready_"+version+"_linux_"+runtime.GOARCH+".tar.gz"), dir)
		out, err := exec.CommandContext(t.Context(), bin, "--version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), version, "the plugin is the release's")
		out, err = exec.CommandContext(t.Context(), bin, "status", "--kubeconfig", c.CP.Kubeconfig()).CombinedOutput()
		require.NoError(t, err, "%s", out)
		var row string
		for line := range strings.Lines(string(out)) {
			if strings.HasPrefix(line, c.NodeName+" ") {
				row = line
			}
		}
		assert.Contains(t, row, "verified", "kubectl nodeready status:\n%s", out)
	})
}

// makeRelease runs `make release` into dist, with the Makefile's defaults but VERSION.
func makeRelease(t *testing.T, root, version, dist string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "release", "VERSION="+version, "DIST="+dist)
	cmd.Dir = root
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains([]string{"REGISTRY", "DIST", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}, name)
	})
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make release:\n%s", out)
}

// checkSums checks SHA256SUMS as `sha256sum --check` does, and that it covers the release.
func checkSums(t *testing.T, dist string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	require.NoError(t, err)
	var names []string
	for line := range strings.Lines(string(b)) {
		sum, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
		require.True(t, ok, "SHA256SUMS line %q", line)
		data, err := os.ReadFile(filepath.Join(dist, name))
		require.NoError(t, err)
		got := sha256.Sum256(data)
		assert.Equal(t, sum, hex.EncodeToString(got[:]), name)
		names = append(names, name)
	}
	for _, want := range []string{"install.yaml", "nodeready.spdx.json", "nodeready.yaml", "image.digest"} {
		assert.Contains(t, names, want)
	}
}

// releasedBy makes the node new again and waits for an agent to release it, then checks that
// the agent pod named the release's image by digest and that the kubelet ran that digest.
func releasedBy(t *testing.T, c *realnode.Cluster, pods *podLog, image, digest string) {
	t.Helper()
	known := pods.pods()
	asNewNode(t, c)
	pod := pods.newPod(t, known)
	var p *corev1.Pod
	poll(t, 3*time.Minute, "the agent pod "+pod+" running", func() bool {
		got, err := c.CP.Client().CoreV1().Pods("kube-system").Get(t.Context(), pod, metav1.GetOptions{})
		if err != nil || len(got.Status.ContainerStatuses) == 0 || got.Status.ContainerStatuses[0].ImageID == "" {
			return false
		}
		p = got
		return true
	})
	require.Len(t, p.Spec.Containers, 1)
	assert.Equal(t, image, p.Spec.Containers[0].Image)
	assert.True(t, strings.HasSuffix(p.Status.ContainerStatuses[0].ImageID, "@"+digest),
		"the kubelet ran %s, want the release's %s", p.Status.ContainerStatuses[0].ImageID, digest)
	released(t, c, pods, pod)
	n := getNode(t, c)
	assert.Equal(t, "true", n.Labels[wellknown.VerifiedLabel])
	assert.False(t, tainted(n))
	assert.Equal(t, "Verified", framework.AgentCondition(n).Reason)
}

// unpack extracts the plugin's archive into dir and returns the binary's path.
func unpack(t *testing.T, archive, dir string) string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var bin string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		path := filepath.Join(dir, filepath.Base(hdr.Name))
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, data, os.FileMode(hdr.Mode)))
		if strings.HasPrefix(hdr.Name, "kubectl-nodeready") {
			bin = path
		}
	}
	require.NotEmpty(t, bin, "the archive holds kubectl-nodeready")
	return bin
}
