// Package kubelet simulates the kubelet of a set of nodes for end-to-end tests: it registers
// Nodes and keeps them healthy (status heartbeat and Lease), watches the pods bound to them,
// and runs the real nodeready binary as a process for each agent pod, with the environment,
// credentials, probes, status reporting, restarts and graceful termination that a real
// kubelet gives a container. A pod with restartPolicy Never or OnFailure (a Job's, a Helm
// hook's or a Helm test's) runs to completion, Succeeded or Failed, and stays until it is
// deleted.
//
// # Agent pods and simulated pods
//
// A pod with a container of the agent's image (Options.AgentImage, any tag or digest) is an
// agent pod: the kubelet runs it. Every other pod is simulated, whatever it says: its
// images are recorded as pulled, its init containers as completed, its containers are
// Running at once and Ready at once, or after the duration in the pod's annotation
// ReadyAfterAnnotation (kubelet.e2e.nodeready.io/ready-after: 5s); no probe runs. On
// deletion its containers end with exit code 0 at once and the kubelet deletes the pod, as
// for an agent pod. Simulated pods stand for the node agents a node waits for (a CNI, a CSI
// node plugin, a device plugin): a test decides when they become Ready.
//
// # Init containers
//
// The init containers of an agent pod run for real, one after another, each to exit code 0
// (a failed one is restarted with back-off), before its container starts; each image is
// recorded as pulled just before the first container of it starts (Pulls, Images). What a
// container runs is resolved as a container runtime would: its command, else the image's
// entrypoint, then its args, with $(NAME) expanded. The agent image's entrypoint
// (/nodeready) is Options.AgentBinary, so the pre-pull variant's `nodeready copy-binary` and
// `nodeready noop` run the real binary. emptyDir volumes are directories on the host, one
// per pod and volume, shared by its containers; as a process has no mount namespace,
// absolute paths under an emptyDir mount, in the command and in the arguments, are
// rewritten to that directory. Other volume kinds are not mapped. A command that is neither
// in an emptyDir nor the agent's entrypoint fails to start, as a file missing from an image
// would, and so does a container of another image without a command.
//
// # Node status
//
// SetCondition and SetAllocatable change what a node reports, as a node agent or a device
// plugin would; the change is written at once and every later heartbeat keeps it.
//
// Processes share the host's network namespace, unlike pods. So that several agents can run
// side by side, each process gets its own loopback port for METRICS_PORT, and the pod's
// probes are sent to that port.
package kubelet
