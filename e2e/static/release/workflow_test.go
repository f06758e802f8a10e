package release

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/nodeready/nodeready/e2e/framework"
)

// workflow is the part of a GitHub Actions workflow these tests read.
type workflow struct {
	On struct {
		Push struct {
			Tags []string `yaml:"tags"`
		} `yaml:"push"`
	} `yaml:"on"`
	Env  map[string]string `yaml:"env"`
	Jobs map[string]struct {
		Permissions map[string]string `yaml:"permissions"`
		Steps       []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func readWorkflow(t *testing.T, root, name string) workflow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".github", "workflows", name))
	require.NoError(t, err)
	var w workflow
	require.NoError(t, yaml.Unmarshal(b, &w), name)
	return w
}

// TestReleaseWorkflow: a pushed version tag runs `make release`, the command anyone runs from a
// clone, which builds every artefact and pushes the image the manifests name and the chart;
// the workflow then only signs that digest, attests the SBOM make release wrote, and publishes
// dist/ as the GitHub release. A tag other than VERSION's is refused before anything is built.
// The refusing step's own script is run here with both kinds of tag.
func TestReleaseWorkflow(t *testing.T) {
	root := framework.RepoRoot(t)
	version := releaseVersion(t, root)
	w := readWorkflow(t, root, "release.yml")

	matched := false
	for _, p := range w.On.Push.Tags {
		ok, err := path.Match(p, version)
		require.NoError(t, err, p)
		matched = matched || ok
	}
	assert.True(t, matched, "pushing the tag %s starts the release (on.push.tags %v)", version, w.On.Push.Tags)
	assert.Equal(t, imageRepo, w.Env["IMAGE_REPO"], "the release signs the image the manifests name")
	assert.Equal(t, imageRepo, w.Env["REGISTRY"]+"/nodeready", "make release REGISTRY=... pushes the image the manifests name")

	require.Len(t, w.Jobs, 1)
	for _, job := range w.Jobs {
		assert.Equal(t, "write", job.Permissions["id-token"], "cosign keyless signing needs the OIDC token")
		assert.Equal(t, "write", job.Permissions["packages"], "pushing to ghcr.io")
		assert.Equal(t, "write", job.Permissions["contents"], "the GitHub release with the kubectl plugin")

		var order []string // what each step does, in order
		for _, s := range job.Steps {
			// Nothing is built but by make release: what is published is what a clone builds.
			for _, other := range []string{"make image", "make plugin-release", "helm package", "helm push", "go build"} {
				assert.NotContains(t, s.Run, other, "step %q builds or pushes apart from make release", s.Name)
			}
			assert.False(t, strings.HasPrefix(s.Uses, "anchore/sbom-action@"), "the SBOM is make release's")
			switch {
			case s.Name == "Refuse a tag that is not the version in VERSION":
				order = append(order, "refuse")
				refuse(t, root, s.Run, version)
			case strings.Contains(s.Run, "go test") && strings.Contains(s.Run, "TestOneVersion"):
				order = append(order, "versions")
			case strings.Contains(s.Run, "make release "):
				order = append(order, "release")
				assert.Contains(t, s.Run, `VERSION="${GITHUB_REF_NAME}"`, "the tag pushed is the tag refused unless it is VERSION")
				assert.Contains(t, s.Run, `REGISTRY="${REGISTRY}"`)
				assert.Contains(t, s.Run, `"digest=$(cat dist/image.digest)"`)
			case strings.Contains(s.Run, "cosign sign "):
				order = append(order, "sign")
				assert.Contains(t, s.Run, `"${IMAGE_REPO}@${DIGEST}"`, "signed by digest, not by tag")
				assert.Equal(t, "${{ steps.release.outputs.digest }}", s.Env["DIGEST"], "the digest make release pushed")
			case strings.Contains(s.Run, "cosign attest "):
				order = append(order, "attest")
				assert.Contains(t, s.Run, "--type spdxjson --predicate dist/nodeready.spdx.json")
				assert.Contains(t, s.Run, `"${IMAGE_REPO}@${DIGEST}"`)
				assert.Equal(t, "${{ steps.release.outputs.digest }}", s.Env["DIGEST"])
			case strings.Contains(s.Run, "gh release create"):
				order = append(order, "github-release")
				assert.Contains(t, s.Run, `"${GITHUB_REF_NAME}" --verify-tag`)
				assert.Contains(t, s.Run, "find dist -maxdepth 1 -type f", "every file make release wrote, the plugin's archives and krew manifest among them")
			}
		}
		assert.Equal(t, []string{"refuse", "versions", "release", "sign", "attest", "github-release"}, order)
	}
}

// refuse runs the release's tag check as the runner would, in a copy holding only VERSION.
func refuse(t *testing.T, root, script, version string) {
	t.Helper()
	require.NotEmpty(t, script)
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "VERSION"), b, 0o644))
	for tag, ok := range map[string]bool{version: true, version + "-rc.1": false, "v0.0.0": false, "latest": false} {
		cmd := exec.Command("bash", "-e", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GITHUB_REF_NAME="+tag)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ok {
			assert.NoError(t, err, "tag %s: %s", tag, out.String())
		} else {
			assert.Error(t, err, "tag %s is refused", tag)
			assert.Contains(t, out.String(), "is not the version in VERSION", "tag %s", tag)
		}
	}
}

// TestMakeImageOnReleaseTag: on a clean checkout of the release tag, `make image` pushes that
// tag with that version; on any other commit, or with changes, a development version that says
// so. Run in a scratch repository holding the Makefile and VERSION, with make -n (prints the
// commands, runs nothing).
func TestMakeImageOnReleaseTag(t *testing.T) {
	root := framework.RepoRoot(t)
	version := releaseVersion(t, root)
	dir := t.TempDir()
	for _, f := range []string{"Makefile", "VERSION"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	pushed := func() (image, ver string) {
		t.Helper()
		cmd := exec.Command("make", "-n", "image")
		cmd.Dir = dir
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { // the defaults, not the caller's
			name, _, _ := strings.Cut(kv, "=")
			return slices.Contains([]string{"VERSION", "IMAGE", "REVISION", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}, name)
		})
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		m := regexp.MustCompile(`go run \./cmd/image .*-version (\S+) .*-push (\S+)`).FindStringSubmatch(string(out))
		require.NotNil(t, m, "make -n image runs cmd/image with -version and -push:\n%s", out)
		return m[2], m[1]
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "release")
	git("tag", "-a", version, "-m", version)

	image, ver := pushed()
	assert.Equal(t, imageRepo+":"+version, image, "the release tag pushes the image the manifests name")
	assert.Equal(t, version, ver)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "VERSION"), []byte(version+"\n\n"), 0o644))
	image, ver = pushed()
	assert.Equal(t, version+"-dirty", ver, "a changed checkout is not the release")
	assert.Equal(t, imageRepo+":"+version+"-dirty", image)

	git("commit", "-q", "-a", "-m", "after")
	_, ver = pushed()
	assert.Regexp(t, "^"+regexp.QuoteMeta(version)+`-1-g[0-9a-f]+$`, ver, "a later commit is a development build")
}

// TestMakeReleaseOnAFork: `make release` names the image by digest in the registry it is
// given and pushes the image and the chart there only when REGISTRY is given, so a fork
// publishes its own release with REGISTRY=ghcr.io/<owner>, and without it the release is
// built, pushed nowhere, naming ghcr.io/nodeready. Read with make -n (prints the commands,
// runs nothing).
func TestMakeReleaseOnAFork(t *testing.T) {
	root := framework.RepoRoot(t)
	commands := func(vars ...string) string {
		t.Helper()
		cmd := exec.Command("make", append([]string{"-n", "release", "VERSION=v9.8.7", "REVISION=0123abcd"}, vars...)...)
		cmd.Dir = root
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			name, _, _ := strings.Cut(kv, "=")
			return slices.Contains([]string{"REGISTRY", "DIST", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}, name)
		})
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}

	fork := commands("REGISTRY=ghcr.io/you", "HELM_PUSH_FLAGS=--plain-http")
	assert.Regexp(t, `(?s)go run \./cmd/image .*-oci \S+/dist/image-oci .*-push ghcr\.io/you/nodeready:v9\.8\.7`, fork)
	assert.Contains(t, fork, `image="ghcr.io/you/nodeready@$(cat `)
	assert.Regexp(t, `helm push \S+/dist/nodeready-9\.8\.7\.tgz oci://ghcr\.io/you/charts --plain-http`, fork)
	assert.Contains(t, fork, "go run ./cmd/sbom -version v9.8.7")
	assert.Contains(t, fork, "go run ./cmd/release sums")

	local := commands()
	assert.NotContains(t, local, "-push ", "no registry given: nothing pushed")
	assert.NotContains(t, local, "helm push")
	assert.Contains(t, local, `image="ghcr.io/nodeready/nodeready@$(cat `, "the manifests name the image where the project publishes it")
}
