package kube

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// object is what a typed client reads and writes.
type object interface {
	runtime.Object
	metav1.Object
}

// typed is the typed client of one resource, making the requests
// client-go's generic typed client (k8s.io/client-go/gentype) makes. gentype
// itself is not used: its package holds the fake clients too, and with them
// client-go/testing, whose managed-fields and OpenAPI machinery would be a
// tenth of the agent's binary.
type typed[T object, L runtime.Object] struct {
	rc        rest.Interface
	resource  string
	namespace string
	newObject func() T
	newList   func() L
}

func newTyped[T object, L runtime.Object](rc rest.Interface, resource, namespace string, newObject func() T, newList func() L) Resource[T, L] {
	return &typed[T, L]{rc: rc, resource: resource, namespace: namespace, newObject: newObject, newList: newList}
}

// request is a request about the resource, protobuf preferred as the
// generated clients of the built-in types prefer it.
func (c *typed[T, L]) request(r *rest.Request) *rest.Request {
	return r.UseProtobufAsDefault().NamespaceIfScoped(c.namespace, c.namespace != "").Resource(c.resource)
}

func (c *typed[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := c.newObject()
	err := c.request(c.rc.Get()).Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := c.newList()
	err := c.request(c.rc.Get()).VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.request(c.rc.Get()).VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

func (c *typed[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := c.newObject()
	err := c.request(c.rc.Post()).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := c.newObject()
	err := c.request(c.rc.Put()).Name(obj.GetName()).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.request(c.rc.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (c *typed[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := c.newObject()
	err := c.request(c.rc.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}

// timeout is a list's or a watch's own bound on the server, also the
// request's.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
