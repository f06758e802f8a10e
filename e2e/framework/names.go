package framework

import (
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// The names of harness that tests use, so that a test imports the framework alone.

// What manifests/ installs, and what every simulated node has.
const (
	Namespace         = harness.Namespace
	DaemonSetName     = harness.DaemonSetName
	ConfigMapName     = harness.ConfigMapName
	AgentSelector     = harness.AgentSelector
	AgentImage        = harness.AgentImage
	AgentBinaryEnv    = harness.AgentBinaryEnv
	BackendService    = harness.BackendService
	DNSName           = harness.DNSName
	FleetLabel        = harness.FleetLabel
	ForeignLabel      = harness.ForeignLabel
	ForeignLabelValue = harness.ForeignLabelValue
	LogsEnv           = harness.LogsEnv
	PollInterval      = harness.PollInterval
	WaitTimeout       = harness.WaitTimeout
)

// ForeignTaints are on every simulated node besides the startup taint (harness.ForeignTaints).
var ForeignTaints = harness.ForeignTaints

type (
	// ClusterOptions configures the control plane and the install (Options.Cluster).
	ClusterOptions = harness.Options
	// NodeOptions describes a simulated node (harness.NodeOptions).
	NodeOptions = harness.NodeOptions
	// NodeState is a node's state as its History records it.
	NodeState = harness.NodeState
	// NodeVersion is one version of a node seen on the watch.
	NodeVersion = harness.NodeVersion
	// History records every state the nodes of a fleet pass through.
	History = harness.History
)

// The states a History records.
var (
	Unverified = harness.Unverified
	Released   = harness.Released
	Unlabelled = harness.Unlabelled
)

// What a test reads off a Node or a pod.
var (
	IsTainted      = harness.IsTainted
	IsReleased     = harness.IsReleased
	AgentCondition = harness.AgentCondition
	PodNode        = harness.PodNode
	Scrape         = harness.Scrape
	LoopbackConfig = harness.LoopbackConfig
)

// OldestKubernetes is the oldest Kubernetes release nodeready supports, for Options.Kubernetes.
const OldestKubernetes = controlplane.FloorKubernetesVersion
