package plugin

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// Keys are the words the plugin judges nodes by: the installed agent's startup taints and
// verified label, read from its ConfigMap (so renamed keys work), else nodeready's defaults,
// with the flags over both.
type Keys struct {
	// Taints are the startup taints: TAINT_KEY and TAINT_EFFECT's, then EXTRA_TAINTS. A
	// taint with the key and effect of one of them holds the node, whatever its value.
	Taints []corev1.Taint `json:"startupTaints"`
	// Label and LabelValue are VERIFIED_LABEL and VERIFIED_LABEL_VALUE.
	Label      string `json:"verifiedLabel"`
	LabelValue string `json:"verifiedLabelValue"`
	// ReverifyTaint is REVERIFY_TAINT; ExternalTaint is TAINT_OWNER=external.
	ReverifyTaint bool `json:"reverifyTaint"`
	ExternalTaint bool `json:"externalTaint"`
	// Source says where they were read: the ConfigMap, or the defaults and why.
	Source string `json:"source"`
}

// keyFlags are the flags that override what the ConfigMap says.
type keyFlags struct {
	namespace, configMap string
	taintKey, label      string
}

// readKeys reads the installed configuration from the ConfigMap and lays the flags over it.
// A ConfigMap that cannot be read leaves the defaults, with a warning that says why; one
// whose keys the agent itself would refuse is an error, as the plugin would misjudge every
// node by them.
func readKeys(ctx context.Context, client Client, f keyFlags, warn func(string)) (Keys, error) {
	data := map[string]string{}
	source := fmt.Sprintf("ConfigMap %s/%s", f.namespace, f.configMap)
	cm, err := client.CoreV1().ConfigMaps(f.namespace).Get(ctx, f.configMap, metav1.GetOptions{})
	switch {
	case err == nil:
		data = cm.Data
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		source = "nodeready's defaults"
		if f.taintKey == "" || f.label == "" {
			warn(fmt.Sprintf("could not read %s/%s (%v): judging nodes by nodeready's defaults; pass --namespace and --name (or --config-map) where nodeready is installed, or --taint-key and --label",
				f.namespace, f.configMap, reason(err)))
		}
	default:
		return Keys{}, fmt.Errorf("read ConfigMap %s/%s: %w", f.namespace, f.configMap, err)
	}
	k, err := keysFrom(data)
	if err != nil {
		return Keys{}, fmt.Errorf("%s: %w", source, err)
	}
	k.Source = source
	if f.taintKey != "" {
		if errs := validation.IsQualifiedName(f.taintKey); len(errs) > 0 {
			return Keys{}, fmt.Errorf("--taint-key %q: %s", f.taintKey, strings.Join(errs, "; "))
		}
		k.Taints[0].Key = f.taintKey
		k.Source += ", --taint-key"
	}
	if f.label != "" {
		if errs := validation.IsQualifiedName(f.label); len(errs) > 0 {
			return Keys{}, fmt.Errorf("--label %q: %s", f.label, strings.Join(errs, "; "))
		}
		k.Label = f.label
		k.Source += ", --label"
	}
	return k, nil
}

// reason is the API error's reason, for a warning of one line.
func reason(err error) string {
	if apierrors.IsNotFound(err) {
		return "not found"
	}
	return "forbidden"
}

// keysFrom reads the keys of the agent's configuration from data, the ConfigMap's: a key
// that is absent takes the agent's default. Only what the plugin needs is read, and checked
// as the agent checks it.
func keysFrom(data map[string]string) (Keys, error) {
	get := func(name, def string) string {
		if v, ok := data[name]; ok {
			return v
		}
		return def
	}
	k := Keys{
		Taints: []corev1.Taint{{
			Key:    get("TAINT_KEY", wellknown.TaintKey),
			Value:  get("TAINT_VALUE", wellknown.TaintValue),
			Effect: corev1.TaintEffect(get("TAINT_EFFECT", string(wellknown.TaintEffect))),
		}},
		Label:      get("VERIFIED_LABEL", wellknown.VerifiedLabel),
		LabelValue: get("VERIFIED_LABEL_VALUE", wellknown.VerifiedLabelValue),
	}
	for _, err := range []error{
		envvar.QualifiedName("TAINT_KEY", k.Taints[0].Key),
		envvar.LabelValue("TAINT_VALUE", k.Taints[0].Value),
		envvar.OneOf("TAINT_EFFECT", string(k.Taints[0].Effect), envvar.TaintEffects),
		envvar.QualifiedName("VERIFIED_LABEL", k.Label),
		envvar.LabelValue("VERIFIED_LABEL_VALUE", k.LabelValue),
	} {
		if err != nil {
			return Keys{}, err
		}
	}
	for s := range strings.SplitSeq(data["EXTRA_TAINTS"], ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		t, err := envvar.ParseTaint(s)
		if err != nil {
			return Keys{}, fmt.Errorf("EXTRA_TAINTS %q: %w", s, err)
		}
		k.Taints = append(k.Taints, t)
	}
	var err error
	if k.ReverifyTaint, err = boolean(data, "REVERIFY_TAINT"); err != nil {
		return Keys{}, err
	}
	k.ExternalTaint = data["TAINT_OWNER"] == "external"
	return k, nil
}

// boolean reads a true/false setting as the agent does: absent or blank is false (the
// agent's default for every setting the plugin reads this way).
func boolean(data map[string]string, name string) (bool, error) {
	v := strings.TrimSpace(data[name])
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: use true or false", name, v)
	}
	return b, nil
}

// isStartupTaint reports whether t has the key and effect of one of the startup taints, as
// the agent tells them.
func (k Keys) isStartupTaint(t corev1.Taint) bool {
	return nodepatch.Spec{Taints: k.Taints}.IsStartupTaint(t)
}

// startupTaints returns the startup taints node carries, as key=value:effect.
func (k Keys) startupTaints(node *corev1.Node) []string {
	var out []string
	for _, t := range node.Spec.Taints {
		if k.isStartupTaint(t) {
			out = append(out, t.ToString())
		}
	}
	return out
}
