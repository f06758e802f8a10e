// Package framework gives each e2e test one object, the Framework, that owns what the test
// works with: the cluster (a control plane with nodeready installed from manifests/, or the
// control plane alone, or real nodes on this machine), its clients and kubectl, the test's
// fleets of simulated nodes, and the waits for a node's condition, its Events and its
// release. Everything it starts stops when the test ends, and the logs are kept after a
// failure ($NODEREADY_E2E_LOGS keeps them always).
//
// The environment is an option, not a kind of test: the Kubernetes release, Karpenter, real
// nodes and a cluster shared by the package's tests are fields of Options.
//
//	func TestNodeReady(t *testing.T) {
//		fw := framework.New(t, framework.Options{})
//		fw.Run("verifies tainted nodes", func(t *testing.T, fw *framework.Framework) {
//			f := fw.NewFleet("verify")
//			nodes := f.Add(5, framework.NodeOptions{})
//			require.NoError(t, f.WaitReleased(t.Context(), nodes...))
//			f.AssertHistory(nodes[0], framework.Unverified, framework.Released)
//		})
//	}
//
// The packages below it are what the Framework is built from, and what the demo and the
// bench use directly: controlplane (etcd and the Kubernetes components), harness (nodeready
// installed, fleets of simulated nodes), kubelet (the simulated kubelet), realnode (real
// kubelet, containerd and flannel nodes), karpenter, and the helpers of the tests of static
// artifacts (chart, kustomize, rules).
package framework
