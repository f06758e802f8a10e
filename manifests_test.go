package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/report"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/internal/wiring"
)

// Claims about what the agent tolerates, in the prose of the manifests, the examples, the
// README and docs/, with the agent (or its DaemonSet) as the subject.
var (
	claimsNotTolerated = regexp.MustCompile(`(?i)\b(the agent|the nodeready daemonset|the daemonset|nodeready)\s+(does not|doesn't|do not|cannot|can't|will not|won't)\s+tolerate`)
	claimsAllTolerated = regexp.MustCompile(`(?i)\b(the agent|the nodeready daemonset|the daemonset|nodeready)( itself)?\s+tolerates\s+(every|all|any)\b`)
)

// TestDocsMatchTolerations reads the DaemonSet's tolerations and fails on any sentence in
// manifests/, examples/, docs/ or README.md that says otherwise.
func TestDocsMatchTolerations(t *testing.T) {
	ds := shippedDaemonSet(t)
	tolerateAll := false
	for _, tol := range ds.Spec.Template.Spec.Tolerations {
		if tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == "" {
			tolerateAll = true
		}
	}

	files := []string{"README.md"}
	for _, dir := range []string{"manifests", "examples", "docs"} {
		require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, path)
			}
			return err
		}))
	}
	checked := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, sentence := range sentences(string(data)) {
			checked++
			if tolerateAll {
				assert.NotRegexp(t, claimsNotTolerated, sentence, "%s: the DaemonSet tolerates every taint", path)
			} else {
				assert.NotRegexp(t, claimsAllTolerated, sentence, "%s: the DaemonSet does not tolerate every taint", path)
			}
		}
	}
	assert.Greater(t, checked, 100, "too little prose found")
}

// sentences joins the lines of a file, without comment markers, and splits the text at
// sentence ends, so a claim broken over comment lines is read whole.
func sentences(text string) []string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		line = strings.TrimLeft(line, "#")
		b.WriteString(strings.TrimSpace(line))
		b.WriteByte(' ')
	}
	return regexp.MustCompile(`[.;:!?]\s+|\n\n`).Split(b.String(), -1)
}

// TestGracePeriodIsTheAgents: the agent fits the release, its settle window
// and the Events that report it into the pod's terminationGracePeriodSeconds
// (report.TerminationGracePeriod); the manifest and the chart grant exactly that.
func TestGracePeriodIsTheAgents(t *testing.T) {
	ds := shippedDaemonSet(t)
	grace := ds.Spec.Template.Spec.TerminationGracePeriodSeconds
	require.NotNil(t, grace, "manifests/03-daemonset.yaml sets terminationGracePeriodSeconds")
	assert.Equal(t, report.TerminationGracePeriod, time.Duration(*grace)*time.Second, "manifests/03-daemonset.yaml")

	chart, err := os.ReadFile("charts/nodeready/templates/daemonset.yaml")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s+terminationGracePeriodSeconds: (\d+)$`).FindSubmatch(chart)
	require.NotNil(t, m, "the chart sets terminationGracePeriodSeconds")
	assert.Equal(t, strconv.Itoa(int(report.TerminationGracePeriod.Seconds())), string(m[1]), "the chart")
}

// TestPolicyNamesTheAgentsFieldManager: the own-node policy lets the field manager the
// agent writes as (wellknown.FieldManager) own its fields; under any other name its
// writes would be refused as a rewrite of managedFields.
func TestPolicyNamesTheAgentsFieldManager(t *testing.T) {
	want := regexp.MustCompile(`(?m)^\s+- name: fieldManager\n\s+expression: "'` + regexp.QuoteMeta(wellknown.FieldManager) + `'"`)
	for _, path := range []string{"manifests/04-admission-policy.yaml", "charts/nodeready/templates/admission-policy.yaml"} {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Regexp(t, want, string(data), path)
	}
}

// TestAgentPodMountsNoConfigMap: the agent's pod mounts no volume that the kubelet can fill
// only once it has registered the pod's ConfigMaps and Secrets, which it does only once the
// node's network is ready: its token volume holds the pod-bound token alone, where client-go
// looks for it, and the CA comes in wiring.CAEnv from kube-root-ca.crt, resolved when the container
// starts. The automatic token volume, with kube-root-ca.crt in it, waited for the kubelet's
// retries on every joining node.
func TestAgentPodMountsNoConfigMap(t *testing.T) {
	pod := shippedDaemonSet(t).Spec.Template.Spec
	require.NotNil(t, pod.AutomountServiceAccountToken)
	assert.False(t, *pod.AutomountServiceAccountToken, "no automatic kube-api-access volume")
	var token string
	for _, v := range pod.Volumes {
		assert.Nil(t, v.ConfigMap, "volume %s", v.Name)
		assert.Nil(t, v.Secret, "volume %s", v.Name)
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			assert.Nil(t, src.ConfigMap, "volume %s", v.Name)
			assert.Nil(t, src.Secret, "volume %s", v.Name)
			if src.ServiceAccountToken != nil {
				token = v.Name
				assert.Equal(t, filepath.Base(wiring.TokenFile), src.ServiceAccountToken.Path)
			}
		}
	}
	require.NotEmpty(t, token, "a projected ServiceAccount token")
	c := shippedAgentContainer(t)
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.Name == token {
			mounted = true
			assert.Equal(t, filepath.Dir(wiring.TokenFile), m.MountPath)
		}
	}
	assert.True(t, mounted, "the agent container mounts %s", token)
	var ca *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == wiring.CAEnv {
			ca = &c.Env[i]
		}
	}
	require.NotNil(t, ca, "the agent container sets %s", wiring.CAEnv)
	require.NotNil(t, ca.ValueFrom)
	require.NotNil(t, ca.ValueFrom.ConfigMapKeyRef)
	assert.Equal(t, "kube-root-ca.crt", ca.ValueFrom.ConfigMapKeyRef.Name)
	assert.Equal(t, "ca.crt", ca.ValueFrom.ConfigMapKeyRef.Key)
}
