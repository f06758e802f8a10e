// Package wellknown holds the words nodeready shares with the cluster: the
// default startup taint and verified label, the annotations derived from the
// label, the node condition and its reasons, the reasons of its Events, and
// the field manager of its writes. Users, alerts, the chart and the tests
// match on these words, so each is defined here once; this package imports
// nothing of nodeready's, and everything else imports it.
package wellknown

import corev1 "k8s.io/api/core/v1"

// The defaults of the startup taint and the verified label (TAINT_KEY,
// TAINT_VALUE, TAINT_EFFECT, VERIFIED_LABEL, VERIFIED_LABEL_VALUE).
const (
	TaintKey           = "node-ready/unverified"
	TaintValue         = "true"
	TaintEffect        = corev1.TaintEffectNoSchedule
	VerifiedLabel      = "node-ready/verified"
	VerifiedLabelValue = "true"
)

// StartupTaintString is the default startup taint as the kubelet's
// --register-with-taints and EXTRA_TAINTS write one: key=value:effect.
const StartupTaintString = TaintKey + "=" + TaintValue + ":" + string(TaintEffect)

// StartupTaint is the default startup taint.
func StartupTaint() corev1.Taint {
	return corev1.Taint{Key: TaintKey, Value: TaintValue, Effect: TaintEffect}
}

// FailedOpenValue is the verified label's value on a node released with
// failing checks (FAILURE_ACTION=fail-open): released, but not verified.
const FailedOpenValue = "failed-open"

// The annotations a release writes, named after the verified label: when the
// node was released, and how long its verification took. The first is
// nodeready's record that it released the node once.
const (
	releasedAtSuffix = "-at"
	durationSuffix   = "-duration"
)

// ReleasedAtAnnotation returns the annotation that records when the node
// with the verified label label was released.
func ReleasedAtAnnotation(label string) string { return label + releasedAtSuffix }

// DurationAnnotation returns the annotation that records how long the
// verification of the node with the verified label label took.
func DurationAnnotation(label string) string { return label + durationSuffix }

// Annotations lists the annotations a release writes for the label.
func Annotations(label string) []string {
	return []string{ReleasedAtAnnotation(label), DurationAnnotation(label)}
}

// The evidence an agent leaves on its own node for the other agents, which read
// it (metadata only, by the config label) before a failure action, to tell a
// fault of their own node from one every new node shares (docs/checks.md,
// "Whose fault it is"):
//
//   - the config label, on a node verified or failing under a configuration:
//     the configuration's fingerprint and the hour (UTC) the agent started or
//     recorded its failure, <fingerprint>.<YYYYMMDDHH>, so a read selects the
//     nodes of one configuration and of the last hours only;
//   - on a failing node, the checks that fail (comma-separated, at most 64
//     bytes of whole names) and when that was recorded (RFC 3339).
const (
	configSuffix   = "-config"
	failingSuffix  = "-failing"
	failedAtSuffix = "-failed-at"
)

// ConfigLabel returns the label that names the configuration and hour under
// which the node with the verified label label was verified or failed.
func ConfigLabel(label string) string { return label + configSuffix }

// FailingAnnotation returns the annotation that lists the checks failing on
// the node with the verified label label.
func FailingAnnotation(label string) string { return label + failingSuffix }

// FailedAtAnnotation returns the annotation that records when the checks of
// FailingAnnotation were recorded as failing.
func FailedAtAnnotation(label string) string { return label + failedAtSuffix }

// EvidenceAnnotations lists the annotations a failing agent writes for the
// label.
func EvidenceAnnotations(label string) []string {
	return []string{FailingAnnotation(label), FailedAtAnnotation(label)}
}

// A release by hand (`kubectl nodeready release`) records who released the
// node and when, in annotations named after the verified label, apart from
// the agent's: it is not nodeready's record of a verification, so a
// re-verification never counts it as one (REVERIFY_TAINT, replace-node).
const (
	releasedBySuffix     = "-released-by"
	releasedByTimeSuffix = "-released-at"
)

// ReleasedByAnnotation returns the annotation that names the user who
// released the node with the verified label label by hand.
func ReleasedByAnnotation(label string) string { return label + releasedBySuffix }

// ReleasedByTimeAnnotation returns the annotation that records when the node
// with the verified label label was released by hand (RFC 3339).
func ReleasedByTimeAnnotation(label string) string { return label + releasedByTimeSuffix }

// HandReleaseAnnotations lists the annotations a release by hand writes for
// the label.
func HandReleaseAnnotations(label string) []string {
	return []string{ReleasedByAnnotation(label), ReleasedByTimeAnnotation(label)}
}

// FieldManager names nodeready's writes in managedFields and audit logs; the
// own-node admission policy names it too.
const FieldManager = "nodeready"

// AgentController is the reporting controller of the agent's Events.
const AgentController = "nodeready.io/agent"

// The uninstall (`nodeready uninstall`) writes under a name of its own, and
// reports as a controller of its own: it is not the agent.
const (
	UninstallFieldManager = "nodeready-uninstall"
	UninstallController   = "nodeready.io/uninstall"
)

// The kubectl plugin (`kubectl nodeready release` and `reverify`) writes for
// a person, under a name of its own, and reports as a controller of its own.
const (
	PluginFieldManager = "kubectl-nodeready"
	PluginController   = "nodeready.io/kubectl-nodeready"
)

// ConditionType is the Node condition nodeready owns. kube-state-metrics
// exports it as kube_node_status_condition{condition="node-ready/Verified"}.
const ConditionType corev1.NodeConditionType = "node-ready/Verified"

// Reason is a reason nodeready gives: of its node condition, and of its
// Events about the node. Where the two tell the same thing (Verified,
// FailedOpen) they use the same word.
type Reason string

// The reasons of the condition (and, for Verified and FailedOpen, of the
// Event of the release).
const (
	Verified      Reason = "Verified"      // every check passed; the node is released
	ChecksFailing Reason = "ChecksFailing" // checks fail; the node is held while they are retried, before a failure is recorded
	ChecksFailed  Reason = "ChecksFailed"  // retries or the initial timeout ran out; the node stays tainted
	FailedOpen    Reason = "FailedOpen"    // released although checks fail (FAILURE_ACTION=fail-open)
	Replacing     Reason = "Replacing"     // its NodeClaim or Node is being deleted (FAILURE_ACTION=replace-node)
	Verifying     Reason = "Verifying"     // re-verification started; the node is tainted again
	Misconfigured Reason = "Misconfigured" // the installation or the cluster stands in the way, not the node
	// SharedFault: the node's checks fail, and its failure action is withheld:
	// nothing from the fleet shows the fault is the node's own (no node of the
	// same configuration passed while it failed, or most fail the same way).
	SharedFault Reason = "SharedFault"
)

// The reasons of the Events only.
const (
	ReleaseFailed        Reason = "ReleaseFailed"        // checks passed, the release was refused: a misconfiguration
	CheckFailed          Reason = "CheckFailed"          // one per failing check and error
	VerificationFailed   Reason = "VerificationFailed"   // retries or the initial timeout ran out; names the failure action
	DNSNotChecked        Reason = "DNSNotChecked"        // released without the dns check: no cluster DNS runs anywhere
	PodNetworkNotChecked Reason = "PodNetworkNotChecked" // released without the podnetwork check: no pod elsewhere
	NotProven            Reason = "NotProven"            // released; a passing check could not prove all it probes (full size, a family)
	PeerUnreachable      Reason = "PeerUnreachable"      // released; pods on other nodes did not answer while more did: their fault
	ReplacingNode        Reason = "ReplacingNode"        // the node's NodeClaim or Node was deleted
	ReplaceFailed        Reason = "ReplaceFailed"        // replace-node did not delete the node
	Reverifying          Reason = "Reverifying"          // the startup taint put back for a re-verification
	ReleasedAtUninstall  Reason = "ReleasedAtUninstall"  // the uninstall removed the startup taint of a node still held, unverified
	ReleasedByHand       Reason = "ReleasedByHand"       // a person released the node with kubectl nodeready release, unverified
)

// MaxMessage bounds the condition's message and an Event's note, in bytes:
// the longest note the API server's validation of events.k8s.io/v1 accepts.
// It sets no limit of its own on a Node condition's message (only the size
// of the request); the same bound keeps it readable in `kubectl describe
// node`, and the condition often carries the Event's text.
const MaxMessage = 1024

// Condition is the state nodeready reports on its node in the condition
// ConditionType.
type Condition struct {
	Status  corev1.ConditionStatus
	Reason  Reason
	Message string
}
