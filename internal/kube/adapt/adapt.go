// Package adapt hands a client-go clientset to code written against
// kube.Interface: the fake clientset of unit tests, with its object tracker
// and reactors, or a real clientset an e2e test already holds. The agent's
// binary never imports it (imports_test.go): it would bring back every API
// group.
package adapt

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/watchlist"

	"github.com/nodeready/nodeready/internal/kube"
)

// Clientset returns cs as a kube.Interface; a nil cs is a nil Interface.
func Clientset(cs kubernetes.Interface) kube.Interface {
	if cs == nil {
		return nil
	}
	return clientset{cs}
}

type clientset struct{ cs kubernetes.Interface }

// IsWatchListSemanticsUnSupported passes on what the clientset says of
// streaming lists: the fake clientset cannot stream them, and an informer
// over it must list instead (k8s.io/client-go/util/watchlist).
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.cs)
}

func (c clientset) CoreV1() kube.CoreV1                   { return coreV1{c.cs} }
func (c clientset) AppsV1() kube.AppsV1                   { return appsV1{c.cs} }
func (c clientset) DiscoveryV1() kube.DiscoveryV1         { return discoveryV1{c.cs} }
func (c clientset) EventsV1() kube.EventsV1               { return eventsV1{c.cs} }
func (c clientset) NetworkingV1() kube.NetworkingV1       { return networkingV1{c.cs} }
func (c clientset) StorageV1() kube.StorageV1             { return storageV1{c.cs} }
func (c clientset) ResourceV1() kube.ResourceV1           { return resourceV1{c.cs} }
func (c clientset) ResourceV1beta1() kube.ResourceV1beta1 { return resourceV1beta1{c.cs} }
func (c clientset) AdmissionregistrationV1() kube.AdmissionregistrationV1 {
	return admissionregistrationV1{c.cs}
}
func (c clientset) Discovery() kube.Discovery { return discovery{c.cs} }

type coreV1 struct{ cs kubernetes.Interface }

func (g coreV1) Nodes() kube.Nodes               { return g.cs.CoreV1().Nodes() }
func (g coreV1) Pods(namespace string) kube.Pods { return g.cs.CoreV1().Pods(namespace) }
func (g coreV1) ConfigMaps(namespace string) kube.ConfigMaps {
	return g.cs.CoreV1().ConfigMaps(namespace)
}

// NodesMetadata lists the nodes and keeps their metadata: what the API server
// answers a list of metadata only with.
func (g coreV1) NodesMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	nodes, err := g.cs.CoreV1().Nodes().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: nodes.ListMeta}
	for _, n := range nodes.Items {
		out.Items = append(out.Items, metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: n.ObjectMeta})
	}
	return out, nil
}
func (g coreV1) RESTClient() rest.Interface { return g.cs.CoreV1().RESTClient() }

type appsV1 struct{ cs kubernetes.Interface }

func (g appsV1) DaemonSets(namespace string) kube.DaemonSets {
	return g.cs.AppsV1().DaemonSets(namespace)
}

type discoveryV1 struct{ cs kubernetes.Interface }

func (g discoveryV1) EndpointSlices(namespace string) kube.EndpointSlices {
	return g.cs.DiscoveryV1().EndpointSlices(namespace)
}

type eventsV1 struct{ cs kubernetes.Interface }

func (g eventsV1) Events(namespace string) kube.Events { return g.cs.EventsV1().Events(namespace) }

type networkingV1 struct{ cs kubernetes.Interface }

func (g networkingV1) IPAddresses() kube.IPAddresses { return g.cs.NetworkingV1().IPAddresses() }
func (g networkingV1) NetworkPolicies(namespace string) kube.NetworkPolicies {
	return g.cs.NetworkingV1().NetworkPolicies(namespace)
}

type storageV1 struct{ cs kubernetes.Interface }

func (g storageV1) CSINodes() kube.CSINodes { return g.cs.StorageV1().CSINodes() }

type resourceV1 struct{ cs kubernetes.Interface }

func (g resourceV1) ResourceSlices() kube.ResourceSlices { return g.cs.ResourceV1().ResourceSlices() }

type resourceV1beta1 struct{ cs kubernetes.Interface }

func (g resourceV1beta1) ResourceSlices() kube.ResourceSlicesV1beta1 {
	return g.cs.ResourceV1beta1().ResourceSlices()
}

type admissionregistrationV1 struct{ cs kubernetes.Interface }

func (g admissionregistrationV1) MutatingAdmissionPolicyBindings() kube.Deleter {
	return g.cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
}

type discovery struct{ cs kubernetes.Interface }

// ServerGroups has no context in client-go's discovery: its request is
// bounded by the client's timeout.
func (d discovery) ServerGroups(context.Context) (*metav1.APIGroupList, error) {
	return d.cs.Discovery().ServerGroups()
}

func (d discovery) RESTClient() rest.Interface { return d.cs.Discovery().RESTClient() }
