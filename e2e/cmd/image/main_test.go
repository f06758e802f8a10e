package main

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework/image"
)

var (
	binariesOnce sync.Once
	binariesDir  string
	binaries     map[string]string // arch -> path
	binariesErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binariesDir != "" {
		os.RemoveAll(binariesDir)
	}
	os.Exit(code)
}

// staticBinaries builds a small static Go program (the pause command) for linux/amd64 and
// linux/arm64, so the images hold real executables of each architecture.
func staticBinaries(t *testing.T) map[string]string {
	t.Helper()
	binariesOnce.Do(func() {
		dir, err := os.MkdirTemp("", "image-test-")
		if binariesErr = err; err != nil {
			return
		}
		binariesDir = dir
		binaries = map[string]string{}
		for _, arch := range []string{"amd64", "arm64"} {
			out := filepath.Join(dir, arch)
			cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/nodeready/nodeready/e2e/cmd/pause")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
			if b, err := cmd.CombinedOutput(); err != nil {
				binariesErr = fmt.Errorf("go build for %s: %w: %s", arch, err, b)
				return
			}
			binaries[arch] = out
		}
	})
	require.NoError(t, binariesErr)
	return binaries
}

func binaryFlag(t *testing.T, archs ...string) string {
	t.Helper()
	bins := staticBinaries(t)
	var parts []string
	for _, a := range archs {
		parts = append(parts, "linux/"+a+"="+bins[a])
	}
	return strings.Join(parts, ",")
}

// TestPushToRegistry pushes the agent image with the credentials of a Docker config to a
// registry that demands them, pulls it back and checks what a kubelet and cosign will see:
// both platforms, the user, the entrypoint, the binary, the CA certificates and the OCI
// annotations.
func TestPushToRegistry(t *testing.T) {
	const user, password = "release", "s3cret"
	srv := httptest.NewServer(basicAuth(user, password, registry.New(registry.Logger(log.New(io.Discard, "", 0)))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/nodeready/nodeready:v0.1.0"
	args := []string{"-binary", binaryFlag(t, "arm64", "amd64"), "-version", "v0.1.0", "-revision", "0123abcd",
		"-push", ref, "-insecure", "-digest-file", filepath.Join(t.TempDir(), "digest")}

	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials
	var stderr bytes.Buffer
	require.Equal(t, 1, run(args, io.Discard, &stderr), "a registry that demands credentials refuses a push without them")
	assert.Contains(t, stderr.String(), "401 Unauthorized")

	dockerConfig(t, host, user, password)
	var stdout bytes.Buffer
	stderr.Reset()
	require.Equal(t, 0, run(args, &stdout, &stderr), stderr.String())
	digest, err := os.ReadFile(args[len(args)-1])
	require.NoError(t, err)
	assert.Equal(t, "pushed "+ref+"@"+strings.TrimSpace(string(digest))+"\n", stdout.String())

	r, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	idx, err := remote.Index(r, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	require.NoError(t, err)
	got, err := idx.Digest()
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(digest)), got.String(), "the digest written is the one pushed")
	want := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/nodeready/nodeready",
		"org.opencontainers.image.revision": "0123abcd",
		"org.opencontainers.image.version":  "v0.1.0",
	}
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, m.MediaType)
	assert.Equal(t, want, m.Annotations, "index annotations")
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		im, err := img.Manifest()
		require.NoError(t, err)
		assert.Equal(t, want, im.Annotations, "manifest annotations of %s", d.Platform)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, d.Platform.Architecture, cf.Architecture)
		assert.Equal(t, "linux", cf.OS)
		assert.Equal(t, "65532:65532", cf.Config.User)
		assert.Equal(t, []string{"/nodeready"}, cf.Config.Entrypoint)
		assert.Equal(t, want, cf.Config.Labels, "config labels of %s", d.Platform)

		files := layerFiles(t, img)
		bin, err := os.ReadFile(staticBinaries(t)[d.Platform.Architecture])
		require.NoError(t, err)
		assert.True(t, bytes.Equal(bin, files["nodeready"]), "/nodeready of %s is the %s binary", d.Platform, d.Platform.Architecture)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"]), "CA bundle parses")
		assert.Greater(t, bytes.Count(files["etc/ssl/certs/ca-certificates.crt"], []byte("BEGIN CERTIFICATE")), 100, "the NSS roots")
	}
	assert.Equal(t, []string{"linux/amd64", "linux/arm64"}, platforms)
}

// TestReproducible builds the same image twice, the platforms given in either order, and gets
// the same digest; a different version gives another.
func TestReproducible(t *testing.T) {
	dir := t.TempDir()
	digest := func(name, binaries, version string) string {
		t.Helper()
		file := filepath.Join(dir, name+".digest")
		var stderr bytes.Buffer
		require.Equal(t, 0, run([]string{"-binary", binaries, "-version", version, "-revision", "0123abcd",
			"-oci", filepath.Join(dir, name), "-digest-file", file}, io.Discard, &stderr), stderr.String())
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		p, err := layout.FromPath(filepath.Join(dir, name))
		require.NoError(t, err)
		idx, err := p.ImageIndex()
		require.NoError(t, err)
		m, err := idx.IndexManifest()
		require.NoError(t, err)
		require.Len(t, m.Manifests, 1, "the layout holds the one index")
		assert.Equal(t, strings.TrimSpace(string(b)), m.Manifests[0].Digest.String())
		assert.Equal(t, version, m.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
		return string(b)
	}
	first := digest("first", binaryFlag(t, "amd64", "arm64"), "v0.1.0")
	assert.Equal(t, first, digest("second", binaryFlag(t, "arm64", "amd64"), "v0.1.0"))
	assert.NotEqual(t, first, digest("other", binaryFlag(t, "amd64", "arm64"), "v0.1.1"))
}

// TestBadInput: each mistake stops the build with a message that names it.
func TestBadInput(t *testing.T) {
	bins := staticBinaries(t)
	out := filepath.Join(t.TempDir(), "oci")
	text := filepath.Join(t.TempDir(), "text")
	require.NoError(t, os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755))
	hostTrue, err := exec.LookPath("true")
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no version", []string{"-binary", "linux/amd64=" + bins["amd64"], "-revision", "r", "-oci", out}, 1, "the image's version is empty"},
		{"no revision", []string{"-binary", "linux/amd64=" + bins["amd64"], "-version", "v", "-oci", out}, 1, "the image's revision is empty"},
		{"no output", []string{"-binary", "linux/amd64=" + bins["amd64"], "-version", "v", "-revision", "r"}, 2, "one of -oci or -push"},
		{"windows", []string{"-binary", "windows/amd64=" + bins["amd64"], "-version", "v", "-revision", "r", "-oci", out}, 1, "Linux only"},
		{"arch mismatch", []string{"-binary", "linux/arm64=" + bins["amd64"], "-version", "v", "-revision", "r", "-oci", out}, 1, "built for EM_X86_64, not arm64"},
		{"not ELF", []string{"-binary", "linux/amd64=" + text, "-version", "v", "-revision", "r", "-oci", out}, 1, "not an ELF executable"},
		{"dynamic", []string{"-binary", "linux/" + runtime.GOARCH + "=" + hostTrue, "-version", "v", "-revision", "r", "-oci", out}, 1, "dynamically linked"},
		{"twice", []string{"-binary", binaryFlag(t, "amd64", "amd64"), "-version", "v", "-revision", "r", "-oci", out}, 1, "linux/amd64 given twice"},
		{"other arch", []string{"-binary", "linux/s390x=" + bins["amd64"], "-version", "v", "-revision", "r", "-oci", out}, 1, `"s390x" is not one the agent is released for`},
		{"bad reference", []string{"-binary", "linux/amd64=" + bins["amd64"], "-version", "v", "-revision", "r", "-push", "Registry/UPPER:tag"}, 2, `-push "Registry/UPPER:tag"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			assert.Equal(t, tc.code, run(tc.args, io.Discard, &stderr))
			assert.Contains(t, stderr.String(), tc.msg)
		})
	}
	_, err = os.Stat(out)
	assert.True(t, os.IsNotExist(err), "nothing written")
}

// TestDefaultRoots: without -ca-certs the image holds the pinned NSS roots.
func TestDefaultRoots(t *testing.T) {
	out := filepath.Join(t.TempDir(), "oci")
	var stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-binary", binaryFlag(t, "amd64"), "-version", "v", "-revision", "r", "-oci", out}, io.Discard, &stderr), stderr.String())
	p, err := layout.FromPath(out)
	require.NoError(t, err)
	idx, err := p.ImageIndex()
	require.NoError(t, err)
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	agent, err := idx.ImageIndex(m.Manifests[0].Digest)
	require.NoError(t, err)
	am, err := agent.IndexManifest()
	require.NoError(t, err)
	img, err := agent.Image(am.Manifests[0].Digest)
	require.NoError(t, err)
	assert.Equal(t, image.NSSRoots(), layerFiles(t, img)["etc/ssl/certs/ca-certificates.crt"])
}

// layerFiles reads the image's one layer: the contents of its regular files by layer path.
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	files, err := image.Files(img)
	require.NoError(t, err)
	data := map[string][]byte{}
	for p, f := range files {
		if !f.Dir {
			data[p[1:]] = f.Data
		}
	}
	return data
}

// basicAuth answers 401 with a Basic challenge unless the request carries user:password.
func basicAuth(user, password string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"credentials required"}]}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// dockerConfig writes a Docker config with credentials for host, as `docker login` (or
// docker/login-action) does, and points DOCKER_CONFIG at it.
func dockerConfig(t *testing.T, host, user, password string) {
	t.Helper()
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"),
		fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, host, auth), 0o600))
	t.Setenv("DOCKER_CONFIG", dir)
}
