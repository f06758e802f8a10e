package kube

import (
	"context"
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The resources nodeready uses, each a Resource of its types.
type (
	Nodes                 = Resource[*corev1.Node, *corev1.NodeList]
	Pods                  = Resource[*corev1.Pod, *corev1.PodList]
	ConfigMaps            = Resource[*corev1.ConfigMap, *corev1.ConfigMapList]
	DaemonSets            = Resource[*appsv1.DaemonSet, *appsv1.DaemonSetList]
	EndpointSlices        = Resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList]
	Events                = Resource[*eventsv1.Event, *eventsv1.EventList]
	IPAddresses           = Resource[*networkingv1.IPAddress, *networkingv1.IPAddressList]
	NetworkPolicies       = Resource[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList]
	CSINodes              = Resource[*storagev1.CSINode, *storagev1.CSINodeList]
	ResourceSlices        = Resource[*resourcev1.ResourceSlice, *resourcev1.ResourceSliceList]
	ResourceSlicesV1beta1 = Resource[*resourcev1beta1.ResourceSlice, *resourcev1beta1.ResourceSliceList]
)

// scheme holds the API groups of Interface, and the options of every
// request, as client-go's clientset scheme holds all of them.
var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	groups := runtime.NewSchemeBuilder(
		corev1.AddToScheme,
		appsv1.AddToScheme,
		discoveryv1.AddToScheme,
		eventsv1.AddToScheme,
		networkingv1.AddToScheme,
		storagev1.AddToScheme,
		resourcev1.AddToScheme,
		resourcev1beta1.AddToScheme,
	)
	utilruntime.Must(groups.AddToScheme(scheme))
	// PartialObjectMetadataList, which a list of metadata only answers with.
	utilruntime.Must(metav1.AddMetaToScheme(scheme))
	// The options of a delete, the one request made of this group.
	metav1.AddToGroupVersion(scheme, admissionregistrationV1)
}

// admissionregistrationV1 is the group version of the creation policy's
// binding, whose types the agent does not need (AdmissionregistrationV1).
var admissionregistrationV1 = schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1"}

// ClientsetConfig returns a copy of c configured as client-go's clientset configures its own
// (kubernetes.NewForConfigAndClient), for typed clients of a few groups that share one HTTP
// client: the default user agent, and one rate limiter for all of them when c sets QPS.
func ClientsetConfig(c *rest.Config) (rest.Config, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return cfg, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	return cfg, nil
}

// NewForConfig returns the clients of Interface, configured as client-go's
// clientset configures its own: one HTTP client and one rate limiter for all
// groups, protobuf preferred where the server speaks it.
func NewForConfig(c *rest.Config) (Interface, error) {
	cfg, err := ClientsetConfig(c)
	if err != nil {
		return nil, err
	}
	// Every response's Date, for the clock check, from the agent's own requests.
	clock := NewClock()
	cfg.Wrap(clock.Wrap)
	// Outside the clock's, so a request's time held back is not counted as its round trip.
	cfg.Wrap(newFirstConn)
	httpClient, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, err
	}
	cs := &clientset{clock: clock}
	for _, g := range []struct {
		rc      *rest.Interface
		gv      schema.GroupVersion
		apiPath string
	}{
		{&cs.core, corev1.SchemeGroupVersion, "/api"},
		{&cs.apps, appsv1.SchemeGroupVersion, "/apis"},
		{&cs.discovery, discoveryv1.SchemeGroupVersion, "/apis"},
		{&cs.events, eventsv1.SchemeGroupVersion, "/apis"},
		{&cs.networking, networkingv1.SchemeGroupVersion, "/apis"},
		{&cs.storage, storagev1.SchemeGroupVersion, "/apis"},
		{&cs.resource, resourcev1.SchemeGroupVersion, "/apis"},
		{&cs.resourceV1beta1, resourcev1beta1.SchemeGroupVersion, "/apis"},
		{&cs.admissionregistration, admissionregistrationV1, "/apis"},
	} {
		if *g.rc, err = restClientFor(cfg, httpClient, g.gv, g.apiPath); err != nil {
			return nil, err
		}
	}
	server := cfg
	server.NegotiatedSerializer = codecs.WithoutConversion()
	if cs.server, err = rest.UnversionedRESTClientForConfigAndClient(&server, httpClient); err != nil {
		return nil, err
	}
	return cs, nil
}

// restClientFor is the REST client of one group version, as the generated
// clients' setConfigDefaults make it.
func restClientFor(cfg rest.Config, httpClient *http.Client, gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
	cfg.GroupVersion = &gv
	cfg.APIPath = apiPath
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	return rest.RESTClientForConfigAndClient(&cfg, httpClient)
}

// clientset holds one REST client per group version; the typed clients are
// made on each call, as cheap as the clientset's own.
type clientset struct {
	core, apps, discovery, events, networking, storage, resource, resourceV1beta1, admissionregistration rest.Interface
	// server asks the API server about itself (/apis, /readyz).
	server rest.Interface
	clock  *Clock
}

// Clock is what ClockOf returns.
func (c *clientset) Clock() *Clock { return c.clock }

func (c *clientset) CoreV1() CoreV1                   { return coreV1{c.core} }
func (c *clientset) AppsV1() AppsV1                   { return appsV1{c.apps} }
func (c *clientset) DiscoveryV1() DiscoveryV1         { return discoveryV1{c.discovery} }
func (c *clientset) EventsV1() EventsV1               { return eventsV1{c.events} }
func (c *clientset) NetworkingV1() NetworkingV1       { return networkingV1{c.networking} }
func (c *clientset) StorageV1() StorageV1             { return storageV1{c.storage} }
func (c *clientset) ResourceV1() ResourceV1           { return resourceV1{c.resource} }
func (c *clientset) ResourceV1beta1() ResourceV1beta1 { return resourceV1beta1{c.resourceV1beta1} }
func (c *clientset) AdmissionregistrationV1() AdmissionregistrationV1 {
	return admissionregistrationV1Client{c.admissionregistration}
}
func (c *clientset) Discovery() Discovery { return discovery{c.server} }

type coreV1 struct{ rc rest.Interface }

func (g coreV1) Nodes() Nodes {
	return newTyped(g.rc, "nodes", "", func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

// metadataOnly asks for a list as PartialObjectMetadataList, as client-go's
// metadata client does: protobuf preferred, JSON where the server has none.
const metadataOnly = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

func (g coreV1) NodesMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	out := &metav1.PartialObjectMetadataList{}
	err := g.rc.Get().SetHeader("Accept", metadataOnly).Resource("nodes").VersionedParams(&opts, parameterCodec).
		Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (g coreV1) Pods(namespace string) Pods {
	return newTyped(g.rc, "pods", namespace, func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

func (g coreV1) ConfigMaps(namespace string) ConfigMaps {
	return newTyped(g.rc, "configmaps", namespace, func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
}

func (g coreV1) RESTClient() rest.Interface { return g.rc }

type appsV1 struct{ rc rest.Interface }

func (g appsV1) DaemonSets(namespace string) DaemonSets {
	return newTyped(g.rc, "daemonsets", namespace, func() *appsv1.DaemonSet { return &appsv1.DaemonSet{} },
		func() *appsv1.DaemonSetList { return &appsv1.DaemonSetList{} })
}

type discoveryV1 struct{ rc rest.Interface }

func (g discoveryV1) EndpointSlices(namespace string) EndpointSlices {
	return newTyped(g.rc, "endpointslices", namespace, func() *discoveryv1.EndpointSlice { return &discoveryv1.EndpointSlice{} },
		func() *discoveryv1.EndpointSliceList { return &discoveryv1.EndpointSliceList{} })
}

type eventsV1 struct{ rc rest.Interface }

func (g eventsV1) Events(namespace string) Events {
	return newTyped(g.rc, "events", namespace, func() *eventsv1.Event { return &eventsv1.Event{} },
		func() *eventsv1.EventList { return &eventsv1.EventList{} })
}

type networkingV1 struct{ rc rest.Interface }

func (g networkingV1) IPAddresses() IPAddresses {
	return newTyped(g.rc, "ipaddresses", "", func() *networkingv1.IPAddress { return &networkingv1.IPAddress{} },
		func() *networkingv1.IPAddressList { return &networkingv1.IPAddressList{} })
}

func (g networkingV1) NetworkPolicies(namespace string) NetworkPolicies {
	return newTyped(g.rc, "networkpolicies", namespace, func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} },
		func() *networkingv1.NetworkPolicyList { return &networkingv1.NetworkPolicyList{} })
}

type storageV1 struct{ rc rest.Interface }

func (g storageV1) CSINodes() CSINodes {
	return newTyped(g.rc, "csinodes", "", func() *storagev1.CSINode { return &storagev1.CSINode{} },
		func() *storagev1.CSINodeList { return &storagev1.CSINodeList{} })
}

type resourceV1 struct{ rc rest.Interface }

func (g resourceV1) ResourceSlices() ResourceSlices {
	return newTyped(g.rc, "resourceslices", "", func() *resourcev1.ResourceSlice { return &resourcev1.ResourceSlice{} },
		func() *resourcev1.ResourceSliceList { return &resourcev1.ResourceSliceList{} })
}

type resourceV1beta1 struct{ rc rest.Interface }

func (g resourceV1beta1) ResourceSlices() ResourceSlicesV1beta1 {
	return newTyped(g.rc, "resourceslices", "", func() *resourcev1beta1.ResourceSlice { return &resourcev1beta1.ResourceSlice{} },
		func() *resourcev1beta1.ResourceSliceList { return &resourcev1beta1.ResourceSliceList{} })
}

type admissionregistrationV1Client struct{ rc rest.Interface }

func (g admissionregistrationV1Client) MutatingAdmissionPolicyBindings() Deleter {
	return deleter{g.rc, "mutatingadmissionpolicybindings"}
}

// deleter deletes objects of a cluster-scoped resource by name.
type deleter struct {
	rc       rest.Interface
	resource string
}

func (d deleter) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return d.rc.Delete().Resource(d.resource).Name(name).Body(&opts).Do(ctx).Error()
}

type discovery struct{ rc rest.Interface }

// ServerGroups reads /apis; the legacy core group of /api, which client-go's
// discovery adds in front, is always there and nodeready never asks for it.
func (d discovery) ServerGroups(ctx context.Context) (*metav1.APIGroupList, error) {
	groups := &metav1.APIGroupList{}
	if err := d.rc.Get().AbsPath("/apis").Do(ctx).Into(groups); err != nil {
		return nil, err
	}
	return groups, nil
}

func (d discovery) RESTClient() rest.Interface { return d.rc }
