package image_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework/image"
)

// finalStage returns the instructions of the Dockerfile's last stage, keyword first.
func finalStage(t *testing.T) [][2]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	var stage [][2]string
	sc := bufio.NewScanner(f)
	var cont string // an instruction continued over lines ending in a backslash
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cont += l + " "
			continue
		}
		line, cont = cont+line, ""
		kw, rest, _ := strings.Cut(line, " ")
		kw = strings.ToUpper(kw)
		if kw == "FROM" {
			stage = nil
		}
		stage = append(stage, [2]string{kw, strings.TrimSpace(rest)})
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, stage)
	return stage
}

// TestAgentMatchesDockerfile holds Agent, which the real node runs, to the image the
// Dockerfile builds for users: base, user, entrypoint and where the binary goes.
func TestAgentMatchesDockerfile(t *testing.T) {
	spec := image.Agent("amd64", []byte("binary"), []byte("certs"))
	files := map[string]image.File{}
	for _, f := range spec.Files {
		files[f.Path] = f
	}
	var user string
	var entrypoint []string
	var copied []string
	labels := map[string]string{}
	args := map[string]bool{}
	for _, in := range finalStage(t) {
		switch in[0] {
		case "FROM":
			assert.Equal(t, "gcr.io/distroless/static-debian12:nonroot", in[1], "Agent models distroless static nonroot")
		case "USER":
			user = in[1]
		case "ENTRYPOINT":
			require.NoError(t, json.Unmarshal([]byte(in[1]), &entrypoint), "ENTRYPOINT in exec form")
		case "ARG":
			for _, a := range strings.Fields(in[1]) {
				name, _, _ := strings.Cut(a, "=")
				args[name] = true
			}
		case "LABEL":
			for _, kv := range labelPairs(t, in[1]) {
				labels[kv[0]] = kv[1]
			}
		case "COPY":
			fields := strings.Fields(in[1])
			copied = append(copied, fields[len(fields)-1])
		default:
			t.Errorf("the Dockerfile's final stage has %s, which Agent does not model", in[0])
		}
	}
	assert.Equal(t, user, spec.User)
	assert.Equal(t, entrypoint, spec.Entrypoint)
	require.NotEmpty(t, copied)
	for _, dst := range copied {
		f, ok := files[dst]
		if assert.True(t, ok, "Agent has no %s", dst) {
			assert.Equal(t, int64(0o755), f.Mode, dst)
			assert.Equal(t, []byte("binary"), f.Data, dst)
		}
	}
	assert.Contains(t, entrypoint[0], "/nodeready")

	// The same OCI labels as AgentIndex sets, from the same build arguments as the binary's
	// version and revision.
	assert.Equal(t, image.Release{Source: image.Source, Revision: "${REVISION}", Version: "${VERSION}"}.Annotations(), labels)
	assert.True(t, args["VERSION"] && args["REVISION"], "the final stage declares VERSION and REVISION, or LABEL sees them empty")

	// What the distroless base brings and the agent relies on: its user by number, and the
	// CA certificates a TLS client in the binary reads.
	assert.Contains(t, string(files["/etc/passwd"].Data), "nonroot:x:65532:65532:")
	assert.Equal(t, []byte("certs"), files[image.CABundle].Data)
	assert.Equal(t, int64(0o1777), files["/tmp"].Mode)
}

// TestBuild reads an image back: config and the layer's files.
func TestBuild(t *testing.T) {
	img, err := image.Build(image.Agent("arm64", []byte("binary"), []byte("certs")))
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "arm64", cf.Architecture)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, []string{"/nodeready"}, cf.Config.Entrypoint)
	files, err := image.Files(img)
	require.NoError(t, err)
	require.Contains(t, files, "/nodeready")
	assert.Equal(t, int64(0o755), files["/nodeready"].Mode)
	assert.Equal(t, []byte("binary"), files["/nodeready"].Data)
	require.Contains(t, files, "/home/nonroot")
	assert.True(t, files["/home/nonroot"].Dir)
	assert.Equal(t, image.NonrootUID, files["/home/nonroot"].UID)
	assert.Equal(t, []byte("certs"), files["/etc/ssl/certs/ca-certificates.crt"].Data)

	again, err := image.Build(image.Agent("arm64", []byte("binary"), []byte("certs")))
	require.NoError(t, err)
	d1, err := img.Digest()
	require.NoError(t, err)
	d2, err := again.Digest()
	require.NoError(t, err)
	assert.Equal(t, d1, d2, "the same inputs give the same image")
}

// labelPairs splits a LABEL instruction's key="value" pairs.
func labelPairs(t *testing.T, s string) [][2]string {
	t.Helper()
	var pairs [][2]string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		key, rest, ok := strings.Cut(s, "=")
		require.True(t, ok, "LABEL %q: want key=value", s)
		var value string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			require.GreaterOrEqual(t, end, 0, "LABEL %q: unterminated quote", s)
			value, s = rest[1:end+1], rest[end+2:]
		} else {
			value, s, _ = strings.Cut(rest, " ")
		}
		pairs = append(pairs, [2]string{key, value})
	}
	return pairs
}
