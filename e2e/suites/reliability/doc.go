// Package reliability proves, with repeated runs against a real control plane, that nodeready
// loses nothing and leaves nothing half done under faults, races and bad input: other
// writers changing the same nodes as fast as they can, the startup taint coming back, SIGTERM
// at any moment, the API server going away, answers that are wrong or slow, a hundred nodes
// at once, and nodes that carry odd taints and labels.
//
// Every test prints its counts (go test -v) and asserts on API objects read back, on every
// version of the nodes seen on a watch, on the simulated kubelet's records of the agent
// processes, on the agents' /metrics and on the API server's /metrics and audit log; never
// on log lines, and never after a fixed sleep. The tests share one control plane and run one
// after another: some of them stop the API server or take permissions away.
//
// Run them with make e2e, or:
//
//	cd e2e && NODEREADY_BIN=$PWD/../bin/nodeready go test -count=1 -timeout 15m -v ./suites/reliability/
package reliability
