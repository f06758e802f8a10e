package plugin

import (
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/internal/kube"
)

// Client is what the plugin asks of the API server: nodes, pods, ConfigMaps and events of
// core/v1, events.k8s.io/v1, and a SelfSubjectReview. It holds client-go's typed clients of
// those three groups, not its whole clientset, which would compile every API group into the
// plugin for each platform of the release; client-go's fake Clientset fits it in tests.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	EventsV1() eventsv1client.EventsV1Interface
	AuthenticationV1() authenticationv1client.AuthenticationV1Interface
}

type clients struct {
	core   *corev1client.CoreV1Client
	events *eventsv1client.EventsV1Client
	authn  *authenticationv1client.AuthenticationV1Client
}

func (c clients) CoreV1() corev1client.CoreV1Interface       { return c.core }
func (c clients) EventsV1() eventsv1client.EventsV1Interface { return c.events }
func (c clients) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return c.authn
}

// newClientFor connects as client-go's kubernetes.NewForConfig does: one HTTP client for
// every group, and one rate limiter when cfg sets QPS.
func newClientFor(cfg *rest.Config) (Client, error) {
	c, err := kube.ClientsetConfig(cfg)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, err
	}
	var cs clients
	if cs.core, err = corev1client.NewForConfigAndClient(&c, httpClient); err != nil {
		return nil, err
	}
	if cs.events, err = eventsv1client.NewForConfigAndClient(&c, httpClient); err != nil {
		return nil, err
	}
	if cs.authn, err = authenticationv1client.NewForConfigAndClient(&c, httpClient); err != nil {
		return nil, err
	}
	return cs, nil
}
