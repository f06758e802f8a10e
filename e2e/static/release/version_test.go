package release

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/semver"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
)

// ImageRepo is where the release workflow pushes the agent image.
const imageRepo = "ghcr.io/nodeready/nodeready"

var (
	// agentRef finds the agent image by name, with its tag or digest if any.
	agentRef = regexp.MustCompile(`ghcr\.io/nodeready/nodeready(?:[:@][A-Za-z0-9_.:-]+)?`)
	// latestRef finds any image named by the tag latest.
	latestRef = regexp.MustCompile(`[A-Za-z0-9._/-]+:latest\b`)
)

// releaseVersion reads VERSION: one canonical semantic version with a leading v.
func releaseVersion(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	v := strings.TrimSpace(string(b))
	require.True(t, semver.IsValid(v) && semver.Canonical(v) == v, "VERSION holds %q, want a version such as v0.1.0", v)
	return v
}

// TestOneVersion: the manifests, the chart, the README and the e2e harness name the agent
// image at the version in VERSION, the tag the release workflow pushes, and nothing names
// an image by :latest, a tag no release publishes.
func TestOneVersion(t *testing.T) {
	root := framework.RepoRoot(t)
	version := releaseVersion(t, root)
	want := imageRepo + ":" + version

	assert.Equal(t, want, framework.AgentImage, "e2e/framework/harness AgentImage")
	assert.Equal(t, imageRepo, kubelet.DefaultAgentImage, "e2e/framework/kubelet DefaultAgentImage")

	// The DaemonSet that `kubectl apply -f manifests/` installs, container by container.
	ds := readYAML(t, filepath.Join(root, "manifests", "03-daemonset.yaml"))
	images := podImages(ds)
	require.NotEmpty(t, images, "manifests/03-daemonset.yaml names no image")
	for _, img := range images {
		assert.Equal(t, want, img, "manifests/03-daemonset.yaml")
	}

	// Every other mention, in every file that users copy or read.
	files := textFiles(t, root, "manifests", "examples", "charts/nodeready", "docs")
	for _, f := range []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md"} {
		files = append(files, filepath.Join(root, f))
	}
	seen := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, f)
		for _, ref := range agentRef.FindAllString(string(b), -1) {
			if ref != imageRepo { // the bare repository, as in a kustomize images: entry or a chart's values
				assert.Equal(t, want, ref, "%s names the agent image at another version", rel)
			}
			seen[rel]++
		}
		for _, ref := range latestRef.FindAllString(string(b), -1) {
			t.Errorf("%s names %s: no release publishes :latest", rel, ref)
		}
	}
	assert.Positive(t, seen["README.md"], "the README names the agent image")

	t.Run("chart", func(t *testing.T) {
		dir := filepath.Join(root, "charts", "nodeready")
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			t.Log("no charts/nodeready in this checkout; the chart's versions are not checked")
			return
		}
		chart := readYAML(t, filepath.Join(dir, "Chart.yaml"))
		assert.Equal(t, version, chart["appVersion"], "Chart.yaml appVersion")
		assert.Equal(t, strings.TrimPrefix(version, "v"), chart["version"], "Chart.yaml version: the chart is released with the agent")
		values := readYAML(t, filepath.Join(dir, "values.yaml"))
		img, _ := values["image"].(map[string]any)
		require.NotNil(t, img, "values.yaml has image")
		assert.Equal(t, imageRepo, img["repository"], "values.yaml image.repository")
		switch tag := img["tag"]; tag {
		case version:
		case "", nil:
			// The tag defaults to appVersion: the image's template (nodeready.image, in
			// templates/_pod.tpl, which every pod of the chart names) must say so.
			b, err := os.ReadFile(filepath.Join(dir, "templates", "_pod.tpl"))
			require.NoError(t, err)
			assert.Regexp(t, `\.Values\.image\.tag\s*\|\s*default\s+\.Chart\.AppVersion`, string(b),
				"values.yaml leaves image.tag empty, so templates/_pod.tpl must default it to appVersion")
		default:
			t.Errorf("values.yaml image.tag is %v, want %s or empty (appVersion)", tag, version)
		}
	})
}

// podImages returns the images of the containers and init containers of a workload.
func podImages(obj map[string]any) []string {
	var images []string
	spec, _ := dig(obj, "spec", "template", "spec").(map[string]any)
	for _, key := range []string{"initContainers", "containers"} {
		cs, _ := spec[key].([]any)
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok {
				img, _ := m["image"].(string)
				images = append(images, img)
			}
		}
	}
	return images
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, yaml.Unmarshal(b, &m), path)
	return m
}

// textFiles lists the files under the given directories of root, those that exist.
func textFiles(t *testing.T, root string, dirs ...string) []string {
	t.Helper()
	var files []string
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if os.IsNotExist(err) && path == filepath.Join(root, d) {
				return filepath.SkipDir
			}
			if err == nil && e.Type().IsRegular() {
				files = append(files, path)
			}
			return err
		})
		require.NoError(t, err)
	}
	return files
}
