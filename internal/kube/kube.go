// Package kube is the part of the Kubernetes API nodeready speaks: a typed
// client for each resource it reads or writes, grouped as client-go's
// clientset groups them, so code written against the clientset reads the
// same. The clients make the requests client-go's typed clients make
// (typed.go), over a scheme of only these API groups (client.go): the
// clientset registers every group of Kubernetes, which made most of the
// agent's binary, and its image is pulled on the path of every new node.
//
// Tests hand in client-go's fake clientset through kube/adapt.
package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Interface is the API nodeready uses, in the clientset's shape.
type Interface interface {
	CoreV1() CoreV1
	AppsV1() AppsV1
	DiscoveryV1() DiscoveryV1
	EventsV1() EventsV1
	NetworkingV1() NetworkingV1
	StorageV1() StorageV1
	ResourceV1() ResourceV1
	ResourceV1beta1() ResourceV1beta1
	AdmissionregistrationV1() AdmissionregistrationV1
	Discovery() Discovery
}

// Resource is a typed client of one resource: the methods every typed client
// of client-go has (and its fake clientset's), but Apply, which needs the
// clientset's apply configurations, and UpdateStatus, which only resources
// with a status have (status writes are patches with the "status"
// subresource).
type Resource[T, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// The API groups, each with the resources nodeready uses of it.
type (
	CoreV1 interface {
		Nodes() Nodes
		// NodesMetadata lists the metadata of nodes only, no spec nor status: the
		// fleet's evidence before a failure action reads labels and annotations.
		NodesMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)
		Pods(namespace string) Pods
		// ConfigMaps is the kubectl plugin's: it reads nodeready's ConfigMap.
		ConfigMaps(namespace string) ConfigMaps
		// RESTClient is for requests no typed client makes: a node read as
		// raw JSON (nodepatch).
		RESTClient() rest.Interface
	}
	AppsV1 interface {
		DaemonSets(namespace string) DaemonSets
	}
	DiscoveryV1 interface {
		EndpointSlices(namespace string) EndpointSlices
	}
	EventsV1     interface{ Events(namespace string) Events }
	NetworkingV1 interface {
		IPAddresses() IPAddresses
		NetworkPolicies(namespace string) NetworkPolicies
	}
	StorageV1       interface{ CSINodes() CSINodes }
	ResourceV1      interface{ ResourceSlices() ResourceSlices }
	ResourceV1beta1 interface{ ResourceSlices() ResourceSlicesV1beta1 }

	// AdmissionregistrationV1 only deletes, by name: the uninstall deletes the
	// creation policy's binding and reads nothing of it, so the group's types
	// stay out of the binary.
	AdmissionregistrationV1 interface {
		MutatingAdmissionPolicyBindings() Deleter
	}
)

// Deleter deletes objects of one resource by name.
type Deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Discovery is what nodeready asks of the API server about itself.
type Discovery interface {
	// ServerGroups returns the API groups the server serves (/apis), with
	// their versions.
	ServerGroups(ctx context.Context) (*metav1.APIGroupList, error)
	// RESTClient is for the server's own paths (/readyz).
	RESTClient() rest.Interface
}
