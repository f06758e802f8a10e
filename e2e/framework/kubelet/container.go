package kubelet

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// agentEntrypoint is the ENTRYPOINT of the agent's image (Dockerfile).
const agentEntrypoint = "/nodeready"

// isAgentPod reports whether the kubelet runs the pod (a container of it has the agent's
// image) rather than simulating it.
func (k *Kubelet) isAgentPod(api *corev1.Pod) bool {
	return slices.ContainsFunc(api.Spec.Containers, func(c corev1.Container) bool { return k.isAgentImage(c.Image) })
}

// isAgentImage reports whether image is the agent's repository, with any tag or digest.
func (k *Kubelet) isAgentImage(image string) bool {
	repo := k.opts.AgentImage
	if repo == "" {
		repo = DefaultAgentImage
	}
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	return name == repo
}

// podVolumes creates a directory under dir for each emptyDir volume of the pod and returns
// them by volume name. They live as long as the pod, as an emptyDir does, and are shared by
// its init containers and containers.
func podVolumes(api *corev1.Pod, dir string) (map[string]string, error) {
	vols := map[string]string{}
	for _, v := range api.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		host := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, fmt.Errorf("create emptyDir %s: %w", v.Name, err)
		}
		vols[v.Name] = host
	}
	return vols, nil
}

// mount is one volume mount of a container: its path in the container and the directory on
// the host that stands for it.
type mount struct{ path, host string }

// mounts are a container's emptyDir mounts, longest path first, so a nested mount wins.
type mounts []mount

func containerMounts(c *corev1.Container, vols map[string]string) mounts {
	var m mounts
	for _, vm := range c.VolumeMounts {
		host, ok := vols[vm.Name]
		if !ok {
			continue // not an emptyDir: not mapped
		}
		if vm.SubPath != "" {
			host = filepath.Join(host, vm.SubPath)
		}
		m = append(m, mount{path: path.Clean(vm.MountPath), host: host})
	}
	slices.SortFunc(m, func(a, b mount) int { return len(b.path) - len(a.path) })
	return m
}

// hostPath maps an absolute path in the container to the host, when it lies in a mount.
func (m mounts) hostPath(p string) (string, bool) {
	if !path.IsAbs(p) {
		return "", false
	}
	p = path.Clean(p)
	for _, mt := range m {
		if p == mt.path {
			return mt.host, true
		}
		if rest, ok := strings.CutPrefix(p, mt.path+"/"); ok {
			return filepath.Join(mt.host, filepath.FromSlash(rest)), true
		}
	}
	return "", false
}

// hostEnv rewrites the values of env that are absolute paths under an emptyDir mount to the
// volume's directory on the host, as commandLine does for the program and its arguments: a
// variable such as the agent's STATE_DIR names a path in the container.
func (m mounts) hostEnv(env map[string]string) {
	for k, v := range env {
		if host, ok := m.hostPath(v); ok {
			env[k] = host
		}
	}
}

// commandLine resolves what container c runs to a program on this machine and its
// arguments, as the container runtime would: command (else the image's entrypoint) followed
// by args, each with $(NAME) expanded from env. A process has no mount namespace of its own,
// so absolute paths under an emptyDir mount, in the program and in the arguments, are
// rewritten to the volume's directory on the host. The agent image's entrypoint is
// AgentBinary. Anything else the container names does not exist here, as a file missing
// from an image.
func (k *Kubelet) commandLine(c *corev1.Container, m mounts, env map[string]string) (string, []string, error) {
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	argv := make([]string, 0, len(c.Command)+len(c.Args)+1)
	if len(c.Command) == 0 {
		if !k.isAgentImage(c.Image) {
			return "", nil, fmt.Errorf("container %s: the entrypoint of image %s cannot run here: give the container a command", c.Name, c.Image)
		}
		argv = append(argv, agentEntrypoint)
	}
	for _, s := range c.Command {
		argv = append(argv, expand(s, lookup))
	}
	for _, s := range c.Args {
		argv = append(argv, expand(s, lookup))
	}
	bin := argv[0]
	if host, ok := m.hostPath(bin); ok {
		bin = host
	} else if k.isAgentImage(c.Image) && path.Clean(bin) == agentEntrypoint {
		bin = k.opts.AgentBinary
	} else {
		return "", nil, fmt.Errorf("container %s: exec %q: no such file in image %s", c.Name, argv[0], c.Image)
	}
	args := argv[1:]
	for i, a := range args {
		if host, ok := m.hostPath(a); ok {
			args[i] = host
		}
	}
	return bin, args, nil
}

// processEnv returns the environment a process of container c starts with: the container's
// environment as a kubelet builds it, the node's overrides (Options.NodeEnv), HOSTNAME, and
// KUBECONFIG for the pod's ServiceAccount token written into dir.
func (k *Kubelet) processEnv(ctx context.Context, p *pod, api *corev1.Pod, c *corev1.Container, dir string) (map[string]string, error) {
	env, err := containerEnv(ctx, k.client, api, c, envInputs{
		podIP: NodeIP, hostIP: NodeIP,
		serviceHost: k.opts.APIServerHost, servicePort: k.opts.APIServerPort,
		allocatable: capacity,
	})
	if err != nil {
		return nil, &startError{"CreateContainerConfigError", err}
	}
	if k.opts.NodeEnv != nil {
		maps.Copy(env, k.opts.NodeEnv(p.node))
	}
	hostname := api.Name
	if api.Spec.Hostname != "" {
		hostname = api.Spec.Hostname
	}
	env["HOSTNAME"] = hostname

	kubeconfig, err := k.writeCredentials(ctx, api, dir)
	if err != nil {
		return nil, &startError{"CreateContainerError", err}
	}
	if kubeconfig != "" {
		env["KUBECONFIG"] = kubeconfig
	}
	return env, nil
}
