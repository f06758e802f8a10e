package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/wellknown"
)

var (
	taintOwners = []string{TaintOwnerNodeready, TaintOwnerExternal}
	backoffs    = []string{"exponential", "linear", "constant"}
	failures    = []string{KeepTainted, FailOpen, ReplaceNode}
	logLevels   = []string{"trace", "debug", "info", "warn", "error"}
	logFormats  = []string{"json", "console"}
)

// validate checks the agent's own values, parses the ones the agent uses
// parsed, and returns every bad one as Errors. Each kind of check validates
// its own (checks.KindOptions).
func (c *Config) validate(dryRun bool) error {
	var bad Errors
	for _, v := range []func() error{
		func() error {
			if c.NodeName == "" && !dryRun {
				return refuse("NODE_NAME", "", "required: set it from the downward API (fieldRef spec.nodeName), or use --dry-run")
			}
			if c.NodeName != "" {
				if err := envvar.DNSName("NODE_NAME", c.NodeName); err != nil {
					return err
				}
			}
			return nil
		},
		func() error { return envvar.QualifiedName("TAINT_KEY", c.TaintKey) },
		func() error { return envvar.LabelValue("TAINT_VALUE", c.TaintValue) },
		func() error { return envvar.OneOf("TAINT_EFFECT", c.TaintEffect, envvar.TaintEffects) },
		c.startupTaints,
		func() error { return envvar.OneOf("TAINT_OWNER", c.TaintOwner, taintOwners) },
		func() error {
			if err := envvar.QualifiedName("VERIFIED_LABEL", c.VerifiedLabel); err != nil {
				return err
			}
			// The release records its time and duration in annotations named after the
			// label: a name part of 55 characters or more makes those keys invalid, and
			// the API server would refuse every release.
			for _, key := range wellknown.Annotations(c.VerifiedLabel) {
				if errs := validation.IsQualifiedName(key); len(errs) > 0 {
					return refuse("VERIFIED_LABEL", c.VerifiedLabel, fmt.Sprintf("the annotation %s that records the release is not a valid key: %s (keep the name after the / at most 54 characters)",
						key, strings.Join(errs, "; ")))
				}
			}
			return nil
		},
		func() error {
			if c.VerifiedLabelValue == wellknown.FailedOpenValue {
				// The value that tells a node released with failing checks: every verified node
				// would look failed open, and the alert on it would fire for all of them.
				return refuse("VERIFIED_LABEL_VALUE", c.VerifiedLabelValue, "is the value that marks a node released with failing checks (fail-open): use another, such as true")
			}
			return envvar.LabelValue("VERIFIED_LABEL_VALUE", c.VerifiedLabelValue)
		},
		func() error { return envvar.Positive("INITIAL_TIMEOUT", c.InitialTimeout) },
		func() error { return envvar.AtLeast("MAX_RETRIES", c.MaxRetries, 1) },
		func() error { return envvar.OneOf("RETRY_BACKOFF", c.RetryBackoff, backoffs) },
		func() error { return envvar.Positive("RETRY_BACKOFF_BASE", c.RetryBackoffBase) },
		func() error {
			if c.RetryBackoffMax < c.RetryBackoffBase {
				return refuse("RETRY_BACKOFF_MAX", c.RetryBackoffMax.String(), "must not be shorter than RETRY_BACKOFF_BASE ("+c.RetryBackoffBase.String()+")")
			}
			return nil
		},
		func() error { return envvar.Positive("CHECK_TIMEOUT", c.CheckTimeout) },
		func() error {
			if c.SettleTime < 0 || c.SettleTime > MaxSettleTime {
				return refuse("SETTLE_TIME", c.SettleTime.String(), "must be from 0s (off) to "+MaxSettleTime.String()+", below the pod's termination grace period")
			}
			return nil
		},
		func() error {
			if c.FinalScrapeTimeout < 0 || c.FinalScrapeTimeout > MaxFinalScrapeTimeout {
				return refuse("METRICS_FINAL_SCRAPE_TIMEOUT", c.FinalScrapeTimeout.String(), "must be from 0s (off) to "+MaxFinalScrapeTimeout.String()+", inside the pod's termination grace period after the SIGTERM")
			}
			return nil
		},
		c.parseChecks,
		func() error {
			if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
				return refuse("STATE_DIR", c.StateDir, "must be an absolute path, such as /run/nodeready, or empty")
			}
			return nil
		},
		func() error {
			if c.MinHoldTime < 0 {
				return refuse("MIN_HOLD_TIME", c.MinHoldTime.String(), "must not be negative: 0s (off) or a duration such as 30s")
			}
			return nil
		},
		c.validateFailureAction,
		c.validateExternalTaint,
		c.validateReverifyTaint,
		func() error { return envvar.OneOf("LOG_LEVEL", c.LogLevel, logLevels) },
		func() error { return envvar.OneOf("LOG_FORMAT", c.LogFormat, logFormats) },
	} {
		if err := v(); !bad.Collect(err) {
			return err
		}
	}
	return bad.Err()
}

// startupTaints parses the taints the agent holds the node with: TAINT_KEY's
// first, then EXTRA_TAINTS, each key and effect once.
func (c *Config) startupTaints() error {
	taints := []corev1.Taint{{Key: c.TaintKey, Value: c.TaintValue, Effect: corev1.TaintEffect(c.TaintEffect)}}
	for _, s := range c.ExtraTaints {
		t, err := envvar.ParseTaint(s)
		if err != nil {
			return refuse("EXTRA_TAINTS", c.ExtraTaints.String(), fmt.Sprintf("%q: %s", s, err))
		}
		if slices.ContainsFunc(taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
			return refuse("EXTRA_TAINTS", c.ExtraTaints.String(), fmt.Sprintf("%s:%s is named twice (TAINT_KEY and TAINT_EFFECT name the first taint)", t.Key, t.Effect))
		}
		taints = append(taints, t)
	}
	c.StartupTaints = taints
	return nil
}

// parseChecks reads CHECKS: names of the catalog, each once.
func (c *Config) parseChecks() error {
	known := make([]string, len(checks.Catalog))
	for i, k := range checks.Catalog {
		known[i] = string(k.Name)
	}
	if len(c.CheckNames) == 0 {
		return refuse("CHECKS", "", "name at least one check: "+strings.Join(known, ", "))
	}
	for _, s := range c.CheckNames {
		name := checks.Name(s)
		if _, ok := checks.Lookup(name); !ok {
			return refuse("CHECKS", c.CheckNames.String(), fmt.Sprintf("unknown check %q: use %s", s, strings.Join(known, ", ")))
		}
		if slices.Contains(c.Checks, name) {
			return refuse("CHECKS", c.CheckNames.String(), fmt.Sprintf("check %q is named twice", s))
		}
		c.Checks = append(c.Checks, name)
	}
	return nil
}

// validateFailureAction also resolves DELETE_FAILED_NODE (compat.go).
func (c *Config) validateFailureAction() error {
	if err := envvar.OneOf("FAILURE_ACTION", c.FailureAction, failures); err != nil {
		return err
	}
	if err := c.fromDeleteFailedNode(); err != nil {
		return err
	}
	if c.FleetWindow < MinFleetWindow || c.FleetWindow > MaxFleetWindow {
		return refuse("FLEET_WINDOW", c.FleetWindow.String(), fmt.Sprintf("between %s and %s", MinFleetWindow, MaxFleetWindow))
	}
	if c.SharedFaultPercentage < 1 || c.SharedFaultPercentage > 100 {
		return refuse("SHARED_FAULT_PERCENTAGE", fmt.Sprint(c.SharedFaultPercentage), "a whole number from 1 to 100")
	}
	if c.FailureAction == FailOpen {
		return envvar.Positive("FAIL_OPEN_AFTER", c.FailOpenAfter)
	}
	return nil
}

// FLEET_WINDOW's bounds: shorter, a node that passed a moment before would not
// count; longer than a day, a read of the fleet would select the nodes of too
// many hours (wellknown.ConfigLabel).
const (
	MinFleetWindow = time.Minute
	MaxFleetWindow = 24 * time.Hour
)

// validateReverifyTaint refuses a NoExecute startup taint with REVERIFY_TAINT: the
// taint goes back on a node that serves workloads, and the taint manager would evict
// every pod that does not tolerate it. A re-verification keeps running pods.
func (c *Config) validateReverifyTaint() error {
	if !c.ReverifyTaint {
		return nil
	}
	for i, t := range c.StartupTaints {
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		name, value := "TAINT_EFFECT", c.TaintEffect
		if i > 0 {
			name, value = "EXTRA_TAINTS", c.ExtraTaints.String()
		}
		return refuse(name, value, fmt.Sprintf("%s:NoExecute with REVERIFY_TAINT=true would evict the workloads of a node being verified again: use NoSchedule, or leave REVERIFY_TAINT false", t.Key))
	}
	return nil
}

// validateExternalTaint refuses the settings that write the startup taint
// when it is another controller's; it runs after validateFailureAction, which
// resolves DELETE_FAILED_NODE.
func (c *Config) validateExternalTaint() error {
	switch {
	case !c.ExternalTaint():
		return nil
	case len(c.ExtraTaints) > 0:
		return refuse("EXTRA_TAINTS", c.ExtraTaints.String(), "names taints nodeready removes, and with TAINT_OWNER=external it removes none: leave it empty")
	case c.ReverifyTaint:
		return refuse("REVERIFY_TAINT", "true", "puts the startup taint back, and with TAINT_OWNER=external that taint is another controller's: leave it false")
	case c.FailureAction == FailOpen:
		return refuse("FAILURE_ACTION", FailOpen, "releases a node with failing checks by removing the taint, and with TAINT_OWNER=external its owner removes it only when node-ready/Verified is True: use keep-tainted or replace-node")
	}
	return nil
}
