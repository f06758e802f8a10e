package kubelet

import "maps"

// OverrideEnv makes the variables that fn returns for a node override every other source of
// the environment of the agent processes the kubelet starts on that node, Options.NodeEnv's
// included: for a test that gives some node's agents a setting that the NodeEnv of its
// harness fixes, such as a nameserver of the test's own. fn is called at each process start
// and must be safe for concurrent use; a nil or empty map overrides nothing.
//
// Call it before the first node is added: the kubelet reads its options without a lock when
// it starts a process. Each call adds fn over the earlier ones.
func (k *Kubelet) OverrideEnv(fn func(node string) map[string]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	base := k.opts.NodeEnv
	k.opts.NodeEnv = func(node string) map[string]string {
		env := map[string]string{}
		if base != nil {
			maps.Copy(env, base(node))
		}
		maps.Copy(env, fn(node))
		return env
	}
}
