package chart

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/framework"
)

// helmTimeout bounds one helm run, so a hanging one fails instead of stalling.
const helmTimeout = 2 * time.Minute

// Release is the release name the README's install command gives.
const Release = "nodeready"

// Dir is charts/nodeready in the repository under test.
func Dir(t *testing.T) string {
	t.Helper()
	return filepath.Join(framework.RepoRoot(t), "charts", "nodeready")
}

// helmBinary is the helm that scripts/build-tools.sh builds; make tools (and make e2e) build it.
func helmBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(framework.RepoRoot(t), ".cache", "tools", "helm", "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm: %v; run make tools (scripts/build-tools.sh helm) to build it", err)
	}
	return bin
}

// RunHelm runs helm with its own empty configuration, cache and data directories, so no
// repository or plugin of the machine's user takes part, and returns stdout; the error
// holds stderr, where helm writes its messages.
func RunHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), helmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBinary(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// Object is one parsed Kubernetes object.
type Object = map[string]any

// objectKey names an object as the API server does: group/version, kind, namespace, name.
func objectKey(o Object) string {
	meta, _ := o["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	return fmt.Sprintf("%v %v %s/%s", o["apiVersion"], o["kind"], ns, name)
}

// ParseObjects splits a multi-document YAML stream into objects by objectKey; documents
// holding only comments are skipped, and an object named twice fails t.
func ParseObjects(t *testing.T, source string, data []byte) map[string]Object {
	t.Helper()
	objects := map[string]Object{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objects
		}
		require.NoError(t, err, source)
		var o Object
		require.NoError(t, yaml.Unmarshal(doc, &o), source)
		if o == nil {
			continue
		}
		key := objectKey(o)
		require.NotContains(t, objects, key, "%s names %s twice", source, key)
		objects[key] = o
	}
}

// ManifestObjects parses the given files of manifests/, as globs relative to it.
func ManifestObjects(t *testing.T, globs ...string) map[string]Object {
	t.Helper()
	objects := map[string]Object{}
	for _, g := range globs {
		files, err := filepath.Glob(filepath.Join(framework.RepoRoot(t), "manifests", g))
		require.NoError(t, err)
		require.NotEmpty(t, files, "no manifests/%s", g)
		for _, f := range files {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			for k, o := range ParseObjects(t, f, data) {
				require.NotContains(t, objects, k, "%s names %s again", f, k)
				objects[k] = o
			}
		}
	}
	return objects
}

// kind says how a setting is written in values.yaml.
type kind int

const (
	text kind = iota
	list      // a YAML list, comma-separated in the ConfigMap
	number
	boolean
)

// setting is a variable of nodeready-config and the value of .Values.config it comes from.
type setting struct {
	value string
	kind  kind
}

// settings maps every variable of manifests/02-configmap.yaml to its chart value.
// TestDefaultsRenderManifests holds the chart's ConfigMap equal to that file, and
// TestSettingsCoverConfigMap holds this table to both.
var settings = map[string]setting{
	"TAINT_KEY":                    {"taintKey", text},
	"TAINT_VALUE":                  {"taintValue", text},
	"TAINT_EFFECT":                 {"taintEffect", text},
	"EXTRA_TAINTS":                 {"extraTaints", list},
	"TAINT_OWNER":                  {"taintOwner", text},
	"VERIFIED_LABEL":               {"verifiedLabel", text},
	"VERIFIED_LABEL_VALUE":         {"verifiedLabelValue", text},
	"INITIAL_TIMEOUT":              {"initialTimeout", text},
	"MAX_RETRIES":                  {"maxRetries", number},
	"RETRY_BACKOFF":                {"retryBackoff", text},
	"RETRY_BACKOFF_BASE":           {"retryBackoffBase", text},
	"RETRY_BACKOFF_MAX":            {"retryBackoffMax", text},
	"CHECK_TIMEOUT":                {"checkTimeout", text},
	"SETTLE_TIME":                  {"settleTime", text},
	"CHECKS":                       {"checks", list},
	"DNS_TEST_DOMAINS":             {"dnsTestDomains", list},
	"DNS_NAMESERVER":               {"dnsNameserver", text},
	"CLUSTER_DNS_SERVICE":          {"clusterDNSService", text},
	"TCP_TARGETS":                  {"tcpTargets", list},
	"HTTP_URLS":                    {"httpURLs", list},
	"HTTP_EXPECTED_STATUS":         {"httpExpectedStatus", text},
	"HTTP_CA_FILE":                 {"httpCAFile", text},
	"APISERVER_PROBE":              {"apiserverProbe", text},
	"CLOCK_MAX_SKEW":               {"clockMaxSkew", text},
	"ENDPOINTS_SERVICE":            {"endpointsService", text},
	"ENDPOINTS_CONNECT":            {"endpointsConnect", boolean},
	"POD_NETWORK_SERVICE":          {"podNetworkService", text},
	"POD_NETWORK_PORT":             {"podNetworkPort", text},
	"POD_NETWORK_HTTP_PATH":        {"podNetworkHTTPPath", text},
	"POD_NETWORK_NODES":            {"podNetworkNodes", number},
	"NETWORKPOLICY_CANARY":         {"networkPolicyCanary", text},
	"DAEMONSETS":                   {"daemonSets", list},
	"DAEMONSETS_SELECTOR":          {"daemonSetsSelector", text},
	"DAEMONSETS_EXCLUDE":           {"daemonSetsExclude", list},
	"NODE_CONDITIONS":              {"nodeConditions", list},
	"REQUIRED_RESOURCES":           {"requiredResources", list},
	"CSI_DRIVERS":                  {"csiDrivers", list},
	"CSI_REQUIRE_ALLOCATABLE":      {"csiRequireAllocatable", boolean},
	"DRA_DEVICES":                  {"draDevices", list},
	"CHECK_COMMAND":                {"checkCommand", text},
	"CHECK_COMMAND_ARGS":           {"checkCommandArgs", list},
	"MIN_HOLD_TIME":                {"minHoldTime", text},
	"FAILURE_ACTION":               {"failureAction", text},
	"FAIL_OPEN_AFTER":              {"failOpenAfter", text},
	"FLEET_WINDOW":                 {"fleetWindow", text},
	"SHARED_FAULT_PERCENTAGE":      {"sharedFaultPercentage", number},
	"DELETE_FAILED_NODE":           {"deleteFailedNode", boolean},
	"REVERIFY_TAINT":               {"reverifyTaint", boolean},
	"DRY_RUN":                      {"dryRun", boolean},
	"ENABLE_METRICS":               {"enableMetrics", boolean},
	"METRICS_PORT":                 {"metricsPort", number},
	"METRICS_FINAL_SCRAPE_TIMEOUT": {"metricsFinalScrapeTimeout", text},
	"LOG_LEVEL":                    {"logLevel", text},
	"LOG_FORMAT":                   {"logFormat", text},
}

// Values maps every variable of manifests/02-configmap.yaml to the chart value it comes from.
func Values() map[string]string {
	out := make(map[string]string, len(settings))
	for name, s := range settings {
		out[name] = s.value
	}
	return out
}

// SetFlags turns nodeready-config settings into helm flags that set the chart values they
// come from, each as its type in values.yaml.
func SetFlags(t *testing.T, config map[string]string) []string {
	t.Helper()
	var flags []string
	for name, v := range config {
		s, ok := settings[name]
		require.True(t, ok, "setting %s has no chart value", name)
		typed, ok := s.typed(v)
		require.True(t, ok, "%s=%q is no %s", name, v, s.kind)
		flags = append(flags, "--set-json", "config."+s.value+"="+typed)
	}
	return flags
}

// SetJSON is the --set-json argument that sets the chart value of the variable name to
// value, as its type in values.yaml; a value that is no such thing goes as the string it
// is, for the schema to refuse. ok is false when the chart has no value for name.
func SetJSON(name, value string) (arg string, ok bool) {
	s, ok := settings[name]
	if !ok {
		return "", false
	}
	typed, _ := s.typed(value)
	return "config." + s.value + "=" + typed, true
}

// typed is v as JSON of the setting's kind, and whether v is one; when it is not, v as a
// JSON string.
func (s setting) typed(v string) (string, bool) {
	var typed any = v
	ok := true
	switch s.kind {
	case list:
		items := []string{}
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		typed = items
	case number:
		n, err := strconv.Atoi(v)
		if ok = err == nil && strconv.Itoa(n) == v; ok {
			typed = n
		}
	case boolean:
		b, err := strconv.ParseBool(v)
		if ok = err == nil; ok {
			typed = b
		}
	}
	js, _ := json.Marshal(typed) // strings, numbers and booleans
	return string(js), ok
}

func (k kind) String() string { return [...]string{"text", "list", "number", "boolean"}[k] }
