// Package harness sets up nodeready end to end on a real local control plane, for the e2e
// scenarios, the demo, reliability and gate tests and benchmarks.
//
// Start runs a control plane (e2e/framework/controlplane), installs nodeready from the repository's
// manifests/ with kubectl, as an operator would, and points its configuration at loopback
// targets. A Fleet is a set of simulated nodes (e2e/framework/kubelet): each runs the real agent
// binary for every agent pod the DaemonSet puts on it, and has its own node-local DNS server
// (checks/dnstest) that can be broken and healed. History records every state a node passes
// through, so a test can assert that no node was ever half released.
//
//	c, err := harness.Start(ctx, harness.Options{})
//	...
//	defer c.Stop()
//	f, err := c.NewFleet(ctx, "demo")
//	...
//	nodes, err := f.AddNodes(ctx, 3, harness.NodeOptions{})
//	...
//	err = f.WaitReleased(ctx, nodes...)
//
// Every function returns an error instead of failing a test, for the demo and the bench;
// StartForTest and NewFleetForTest (testing.go) wrap Start and NewFleet for tests, with
// cleanup and logs kept after a failure. Tests reach them through e2e/framework's Framework.
//
// The control plane binaries come from scripts/build-control-plane.sh and the agent from
// make build; see Options.AgentBinary.
package harness
