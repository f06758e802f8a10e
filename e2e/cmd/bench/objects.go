package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// The nodes of the overhead and scale benchmarks have no kubelet: the benchmark registers
// them, creates the agent's pod and token as the DaemonSet controller and the kubelet
// would, and runs the agent itself. benchLabel keeps them apart from fleet nodes.
const (
	benchLabel         = "bench.nodeready.io/run"
	agentSA            = "nodeready" // manifests/00-serviceaccount.yaml
	tokenExpirySeconds = 3600
)

// newNode is a registered, Ready node with the startup taint, as a kubelet registers it.
func newNode(name, run string) *corev1.Node {
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			benchLabel: run, corev1.LabelHostname: name, corev1.LabelOSStable: "linux",
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{wellknown.StartupTaint()}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		},
	}
}

// newAgentPod is the agent's pod on node, bound already, so that its token names the node.
func newAgentPod(node, run string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeready-" + node, Namespace: harness.Namespace, Labels: map[string]string{benchLabel: run}},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: agentSA,
			Containers:         []corev1.Container{{Name: "nodeready", Image: harness.AgentImage}},
			Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
}

// agentToken creates the pod and returns a token bound to it, as the kubelet requests
// for the pod's projected ServiceAccount token. The API server puts the pod's node into
// it, which the admission policy requires of every node write.
func agentToken(ctx context.Context, client kubernetes.Interface, node, run string) (string, error) {
	pods := client.CoreV1().Pods(harness.Namespace)
	want := newAgentPod(node, run)
	pod, err := provisioned(func() (*corev1.Pod, error) { return pods.Create(ctx, want, metav1.CreateOptions{}) },
		func() (*corev1.Pod, error) { return pods.Get(ctx, want.Name, metav1.GetOptions{}) })
	if err != nil {
		return "", fmt.Errorf("create pod for %s: %w", node, err)
	}
	tr, err := provisioned(func() (*authenticationv1.TokenRequest, error) {
		return client.CoreV1().ServiceAccounts(harness.Namespace).CreateToken(ctx, agentSA, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: ptr.To[int64](tokenExpirySeconds),
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			},
		}, metav1.CreateOptions{})
	}, nil)
	if err != nil {
		return "", fmt.Errorf("request token for %s: %w", node, err)
	}
	return tr.Status.Token, nil
}

// provisionBackoff spaces the attempts of a create the API server was too busy to answer.
var provisionBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: 8, Cap: 30 * time.Second}

// provisioned creates an object the way the provisioner, the DaemonSet controller and the
// kubelet, for which the benchmark stands in, do when the API server is too busy to answer in
// time: it tries again. A create whose attempt timed out may have been done all the same; get
// (nil where a second one is harmless) then reads it. Without this, a node the benchmark failed
// to create at the height of a burst would count as one nodeready did not release.
func provisioned[T any](create, get func() (T, error)) (T, error) {
	var out T
	err := retry.OnError(provisionBackoff, busy, func() error {
		var err error
		out, err = create()
		if apierrors.IsAlreadyExists(err) && get != nil {
			out, err = get()
		}
		return err
	})
	return out, err
}

// busy tells an API server that did not serve a request in time from one that refused it.
func busy(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err)
}

// writeKubeconfig writes a kubeconfig with the token into dir, for an agent process.
func writeKubeconfig(dir, server, caFile, token string) (string, error) {
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos["agent"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["agent"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "agent"}
	cfg.CurrentContext = "agent"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}
