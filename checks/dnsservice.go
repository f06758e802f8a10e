package checks

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/kube"
)

// FindClusterDNS is CLUSTER_DNS_SERVICE's default: the cluster DNS Service is found, whatever
// its name (kube-dns on kubeadm and the managed clusters, rke2-coredns-rke2-coredns on RKE2,
// dns-default in openshift-dns), by DNSService.
const FindClusterDNS = "auto"

// defaultDNSService is what the cluster DNS Service is taken for when nothing finds it.
var defaultDNSService = types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}

// DNSService is the cluster DNS Service: the one CLUSTER_DNS_SERVICE names, or the one
// found from the nameserver of this pod's resolv.conf. The kubelet writes there the Service's
// ClusterIP (its clusterDNS), and the API server's IPAddress object of that address
// (networking.k8s.io/v1, Kubernetes 1.33 and later) names the Service it belongs to. Where
// no IPAddress says (an older API server), the EndpointSlices of kube-system labelled
// k8s-app=kube-dns, as every CoreDNS and kube-dns install labels its Service, name it; else
// kube-system/kube-dns. What was found is kept for the agent's life.
type DNSService struct {
	client     kube.Interface
	named      types.NamespacedName
	resolvConf string

	mu    sync.Mutex
	found types.NamespacedName // kept for the agent's life
	last  types.NamespacedName // what the last Get returned, for String
}

// NamedDNSService is the Service namespace/name, never looked for.
func NamedDNSService(nn types.NamespacedName) *DNSService { return &DNSService{named: nn} }

// FindDNSService finds the Service from the nameservers of resolvConf (the pod's
// /etc/resolv.conf) with client.
func FindDNSService(client kube.Interface, resolvConf string) *DNSService {
	return &DNSService{client: client, resolvConf: resolvConf}
}

// String names the Service for people: as named or found, else how it is found.
func (s *DNSService) String() string {
	if s.named.Name != "" {
		return s.named.String()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.Name != "" {
		return s.last.String()
	}
	return "the cluster DNS Service"
}

// Get returns the Service. An API server that refuses the lookups is a Misconfiguration.
func (s *DNSService) Get(ctx context.Context) (types.NamespacedName, error) {
	if s.named.Name != "" {
		return s.named, nil
	}
	s.mu.Lock()
	found := s.found
	s.mu.Unlock()
	if found.Name == "" {
		var err error
		if found, err = s.find(ctx); err != nil {
			return types.NamespacedName{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if found.Name == "" {
		s.last = defaultDNSService // looked for again next time
	} else {
		s.found, s.last = found, found
	}
	return s.last, nil
}

// find looks for the Service: by the IPAddress of a nameserver, then by the EndpointSlices
// labelled for it. The zero name when neither says.
func (s *DNSService) find(ctx context.Context) (types.NamespacedName, error) {
	for _, ns := range nameservers(s.resolvConf) {
		ip, err := s.client.NetworkingV1().IPAddresses().Get(ctx, ns.String(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // not a ClusterIP, or an API server without IPAddress objects
		case err != nil:
			return types.NamespacedName{}, fmt.Errorf("find the cluster DNS Service: get the IPAddress %s of resolv.conf's nameserver: %w", ns, apiError(err))
		}
		if ref := ip.Spec.ParentRef; ref != nil && ref.Group == "" && ref.Resource == "services" {
			return types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, nil
		}
	}
	list, err := s.client.DiscoveryV1().EndpointSlices(defaultDNSService.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "k8s-app=kube-dns", ResourceVersion: "0",
	})
	if err != nil {
		return types.NamespacedName{}, fmt.Errorf("find the cluster DNS Service: list the EndpointSlices labelled k8s-app=kube-dns in %s: %w",
			defaultDNSService.Namespace, apiError(err))
	}
	names := map[string]bool{}
	for _, slice := range list.Items {
		if name := slice.Labels[discoveryv1.LabelServiceName]; name != "" {
			names[name] = true
		}
	}
	if len(names) == 1 { // more than one is no answer: each could be the one
		for name := range names {
			return types.NamespacedName{Namespace: defaultDNSService.Namespace, Name: name}, nil
		}
	}
	return types.NamespacedName{}, nil
}

// nameservers reads the nameserver addresses of a resolv.conf; none when it cannot be read.
func nameservers(path string) []netip.Addr {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				out = append(out, a.WithZone(""))
			}
		}
	}
	return out
}
