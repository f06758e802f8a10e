package checks

import (
	"context"
	"errors"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeready/nodeready/internal/kube"
)

// ErrNoClusterDNS marks a dns check that failed while the cluster DNS Service
// has no ready endpoint anywhere in the cluster. It wraps ErrSkipped: no node
// can pass a DNS check then, so holding this one protects nothing, and in a
// cluster whose every node is tainted (a new cluster, a pool swap, a
// recovery) the DNS pods could never be scheduled: a deadlock.
var ErrNoClusterDNS = fmt.Errorf("%w: cannot be checked: no cluster DNS is running", ErrSkipped)

var _ Check = (*UnlessNoClusterDNS)(nil)

// UnlessNoClusterDNS is a DNS check that, when it fails, looks at the
// EndpointSlices of the cluster DNS Service. When the Service has slices and
// none holds a ready endpoint, the failure becomes ErrNoClusterDNS. In every
// other case (slices with a ready endpoint, no slices at all, or the lookup
// failing) the DNS failure stands: only a cluster DNS that is known to be
// down excuses it.
type UnlessNoClusterDNS struct {
	Check
	client  kube.Interface
	service *DNSService
}

// NewUnlessNoClusterDNS wraps dns with the cluster DNS Service.
func NewUnlessNoClusterDNS(dns Check, client kube.Interface, service *DNSService) *UnlessNoClusterDNS {
	return &UnlessNoClusterDNS{Check: dns, client: client, service: service}
}

// lookupDelay is how long the query has to answer before the Service is looked at beside
// it. A working resolver answers in milliseconds, so a healthy node pays no request for the
// Service; on the first node of a cluster, the query waits for its whole deadline (kube-proxy
// rejects packets to a Service without endpoints, and the Go resolver retries) while the
// EndpointSlices already say that no cluster DNS runs anywhere.
const lookupDelay = time.Second

// Run implements Check. The Service is looked at when the query failed, or beside it when it
// has not answered within lookupDelay; then a Service known to have no ready endpoint ends
// the query at once.
func (c *UnlessNoClusterDNS) Run(ctx context.Context) error {
	query, cancel := context.WithCancel(ctx)
	defer cancel()
	answer := make(chan error, 1)
	go func() { answer <- c.Check.Run(query) }()
	wait := time.NewTimer(lookupDelay)
	defer wait.Stop()
	select {
	case err := <-answer:
		if err == nil || errors.Is(err, ErrSkipped) {
			return err
		}
		lookupCtx, cancelLookup := lookupContext(ctx)
		defer cancelLookup()
		if down, reason := c.down(lookupCtx); down {
			return fmt.Errorf("%w (%s): %w", ErrNoClusterDNS, reason, err)
		}
		return err
	case <-wait.C:
	}
	down, reason := c.down(ctx)
	if !down {
		return <-answer // the Service was looked at: a later failure stands without a second look
	}
	select {
	case err := <-answer:
		if err == nil {
			return nil // it answered after all
		}
	default:
		// Not waited for: on a real node the cancelled query took 4s more to return
		// (measured with the real-node bench), the rest of an attempt's timeout. It
		// ends with the context; its answer goes to the buffered channel unread.
	}
	return fmt.Errorf("%w (%s): the query got no answer in %s", ErrNoClusterDNS, reason, lookupDelay)
}

// down reports whether the Service is known to have no ready endpoint: it has
// EndpointSlices and none holds one. A failed lookup knows nothing.
func (c *UnlessNoClusterDNS) down(ctx context.Context) (bool, string) {
	svc, err := c.service.Get(ctx)
	if err != nil {
		return false, ""
	}
	ready, n, err := readyEndpoints(ctx, c.client, svc.Namespace, svc.Name)
	return err == nil && n > 0 && !ready, fmt.Sprintf("%s has no ready endpoint", svc)
}

// lookupBudget bounds the EndpointSlices lookup after a DNS query that used up
// the check's time.
const lookupBudget = 2 * time.Second

// lookupContext is the context of the EndpointSlices lookup: ctx, unless the
// DNS query used up the check's time. While the cluster DNS Service has no
// endpoint, kube-proxy rejects the queries and the Go resolver retries until
// its deadline: on a real node, the bootstrap excuse needs a lookup after that
// deadline, bounded by lookupBudget. A ctx that was cancelled (SIGTERM) stays
// cancelled.
func lookupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	expired := errors.Is(ctx.Err(), context.DeadlineExceeded) || (ctx.Err() == nil && ok && time.Until(deadline) < lookupBudget)
	if !expired {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), lookupBudget)
}

// readyEndpoints lists the EndpointSlices of namespace/service and reports
// whether any holds a ready endpoint, and how many slices there are.
func readyEndpoints(ctx context.Context, client kube.Interface, namespace, service string) (ready bool, slices int, err error) {
	list, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{discoveryv1.LabelServiceName: service}.String(),
	})
	if err != nil {
		return false, 0, fmt.Errorf("list EndpointSlices of %s/%s: %w", namespace, service, apiError(err))
	}
	for i := range list.Items {
		if _, ok := readyAddress(&list.Items[i]); ok {
			return true, len(list.Items), nil
		}
	}
	return false, len(list.Items), nil
}
