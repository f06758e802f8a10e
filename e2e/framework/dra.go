package framework

// DRADriver is a stand-in DRA driver: tests write its ResourceSlices as a kubelet plugin
// would (one pool per node, named like the node), through the real API server.
const DRADriver = "gpu.nodeready.example"

// NewDRANode installs the dra gate's RBAC (manifests/gates/dra.yaml) and adds a node of a new
// fleet whose agent runs the gate with DRA_DEVICES=devices and one round per failure.
func (f *Framework) NewDRANode(fleet, devices string) (*Fleet, string) {
	f.t.Helper()
	if out, err := f.Kubectl("apply", "-f", f.Manifest("gates", "dra.yaml")); err != nil {
		f.t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	return f.NewFleetWithNode(fleet, NodeOptions{Env: map[string]string{
		"CHECKS": "dns,tcp,apiserver,endpoints,dra", "DRA_DEVICES": devices, "MAX_RETRIES": "1"}})
}
