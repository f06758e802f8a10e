package envvar

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TaintEffects are the effects a startup taint may have (TAINT_EFFECT, EXTRA_TAINTS).
var TaintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

// ParseTaint reads key[=value]:effect, the kubelet's --register-with-taints form
// that EXTRA_TAINTS takes. The agent and the kubectl plugin, which reads the
// agent's ConfigMap, refuse the same taints through it.
func ParseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, errors.New("write key[=value]:effect, such as readiness.k8s.io/nodeready=true:NoSchedule")
	}
	key, value, _ := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("not a valid taint key: %s", strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("not a valid taint value: %s", strings.Join(errs, "; "))
	}
	if !slices.Contains(TaintEffects, effect) {
		return corev1.Taint{}, fmt.Errorf("effect %q: use one of %s", effect, strings.Join(TaintEffects, ", "))
	}
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}, nil
}
