package plugin

import (
	"context"
	"encoding/json"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/internal/kube"
)

// Client is what the plugin asks of the API server: nodes, pods and ConfigMaps of core/v1,
// events.k8s.io/v1, and a SelfSubjectReview. It is the agent's lean client (internal/kube),
// not client-go's typed clients: any of those registers every API group of Kubernetes
// (client-go's kubernetes/scheme), which the release would compile for each platform of the
// plugin. client-go's fake Clientset fits it in tests through kube/adapt.
type Client interface {
	CoreV1() kube.CoreV1
	EventsV1() kube.EventsV1
	AuthenticationV1() AuthenticationV1
}

// AuthenticationV1 is the one request the plugin makes of authentication.k8s.io/v1.
type AuthenticationV1 interface {
	SelfSubjectReviews() SelfSubjectReviews
}

// SelfSubjectReviews asks the API server who the request comes from, as client-go's typed
// client of the same name does.
type SelfSubjectReviews interface {
	Create(ctx context.Context, review *authenticationv1.SelfSubjectReview, opts metav1.CreateOptions) (*authenticationv1.SelfSubjectReview, error)
}

type clients struct {
	kube.Interface
	authn selfSubjectReviews
}

func (c clients) AuthenticationV1() AuthenticationV1                { return c.authn }
func (r selfSubjectReviews) SelfSubjectReviews() SelfSubjectReviews { return r }

// newClientFor connects as client-go's kubernetes.NewForConfig does: one HTTP client for
// every group, and one rate limiter when cfg sets QPS.
func newClientFor(cfg *rest.Config) (Client, error) {
	cs, err := kube.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return clients{Interface: cs, authn: selfSubjectReviews{cs.Discovery().RESTClient()}}, nil
}

// selfSubjectReviews sends the review as JSON over the client's unversioned REST client:
// the group's types need no scheme for the one create the plugin makes.
type selfSubjectReviews struct{ rc rest.Interface }

func (r selfSubjectReviews) Create(ctx context.Context, review *authenticationv1.SelfSubjectReview, opts metav1.CreateOptions) (*authenticationv1.SelfSubjectReview, error) {
	in := *review
	in.APIVersion, in.Kind = authenticationv1.SchemeGroupVersion.String(), "SelfSubjectReview"
	body, err := json.Marshal(&in)
	if err != nil {
		return nil, err
	}
	req := r.rc.Post().AbsPath("/apis", authenticationv1.GroupName, "v1", "selfsubjectreviews").
		SetHeader("Content-Type", "application/json").SetHeader("Accept", "application/json").Body(body)
	for _, d := range opts.DryRun {
		req.Param("dryRun", d)
	}
	if opts.FieldManager != "" {
		req.Param("fieldManager", opts.FieldManager)
	}
	raw, err := req.Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	out := &authenticationv1.SelfSubjectReview{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("decode the SelfSubjectReview: %w", err)
	}
	return out, nil
}
