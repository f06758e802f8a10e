package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

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
func readKeys(ctx context.Context, client kubernetes.Interface, f keyFlags, warn func(string)) (Keys, error) {
	data := map[string]string{}
	source := fmt.Sprintf("ConfigMap %s/%s", f.namespace, f.configMap)
	cm, err := client.CoreV1().ConfigMaps(f.namespace).Get(ctx, f.configMap, metav1.GetOptions{})
	switch {
	case err == nil:
		data = cm.Data
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		source = "nodeready's defaults"
		if f.taintKey == "" || f.label == "" {
			warn(fmt.Sprintf("could not read %s/%s (%v): judging nodes by nodeready's defaults; pass --namespace and --config-map where nodeready is installed, or --taint-key and --label",
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
	if errs := validation.IsQualifiedName(k.Taints[0].Key); len(errs) > 0 {
		return Keys{}, fmt.Errorf("TAINT_KEY=%q: %s", k.Taints[0].Key, strings.Join(errs, "; "))
	}
	if !slices.Contains(effects, k.Taints[0].Effect) {
		return Keys{}, fmt.Errorf("TAINT_EFFECT=%q: use one of NoSchedule, PreferNoSchedule, NoExecute", k.Taints[0].Effect)
	}
	for s := range strings.SplitSeq(data["EXTRA_TAINTS"], ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		t, err := parseTaint(s)
		if err != nil {
			return Keys{}, fmt.Errorf("EXTRA_TAINTS %q: %w", s, err)
		}
		k.Taints = append(k.Taints, t)
	}
	if errs := validation.IsQualifiedName(k.Label); len(errs) > 0 {
		return Keys{}, fmt.Errorf("VERIFIED_LABEL=%q: %s", k.Label, strings.Join(errs, "; "))
	}
	var err error
	if k.ReverifyTaint, err = boolean(data, "REVERIFY_TAINT"); err != nil {
		return Keys{}, err
	}
	k.ExternalTaint = data["TAINT_OWNER"] == "external"
	return k, nil
}

var effects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

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

// parseTaint reads key[=value]:effect, the kubelet's --register-with-taints form that
// EXTRA_TAINTS takes.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, errors.New("write key[=value]:effect")
	}
	key, value, _ := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("not a valid taint key: %s", strings.Join(errs, "; "))
	}
	t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
	if !slices.Contains(effects, t.Effect) {
		return corev1.Taint{}, fmt.Errorf("effect %q: use one of NoSchedule, PreferNoSchedule, NoExecute", effect)
	}
	return t, nil
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
