package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/kubernetes"
)

// profileSegment is how long each of the API server's CPU profiles of a burst samples: the
// burst is profiled in segments, one after the other, until it ends, and the last one ends at
// most this long after it.
const profileSegment = 10 * time.Second

// profileAPIServer profiles the API server's CPU (its /debug/pprof/profile) in segments from
// now until the function it returns is called, which waits for the last segment and returns
// them merged; with a path it also writes them there (go tool pprof reads it).
func profileAPIServer(ctx context.Context, admin kubernetes.Interface, path string) func() (*profile.Profile, error) {
	stop := make(chan struct{})
	done := make(chan struct{})
	var profiles []*profile.Profile
	var firstErr error
	go func() {
		defer close(done)
		for {
			body, err := admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(int(profileSegment.Seconds()))).Timeout(profileSegment + time.Minute).DoRaw(ctx)
			if err == nil {
				var p *profile.Profile
				if p, err = profile.Parse(bytes.NewReader(body)); err == nil {
					profiles = append(profiles, p)
				}
			}
			if err != nil {
				firstErr = err
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	return func() (*profile.Profile, error) {
		close(stop)
		<-done
		if len(profiles) == 0 {
			return nil, firstErr
		}
		merged, err := profile.Merge(profiles)
		if err != nil {
			return nil, err
		}
		if path != "" {
			var b bytes.Buffer
			if err := merged.Write(&b); err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				return nil, err
			}
		}
		return merged, nil
	}
}

// cpuPart is a share of the API server's CPU, told by a function on the sampled stacks.
type cpuPart struct {
	name   string
	frames []string // a sample is this part's when one of its functions contains one of these
}

// apiServerParts tell the API server's CPU during a burst apart by what it served, in this
// order: a sample goes to the first part one of whose frames is on its stack, so the TLS
// handshake of a request counts as the handshake and its admission as the policies', not as
// the request.
var apiServerParts = []cpuPart{
	{"TLS handshakes: one per client connection (each agent has its own)", []string{"crypto/tls.(*Conn).serverHandshake", "crypto/tls.(*Conn).clientHandshake"}},
	{"admission: nodeready's ValidatingAdmissionPolicies", []string{"policy/validating.(*Plugin).Validate"}},
	{"POST serviceaccounts/token: the benchmark's, as the kubelet asks for each agent pod", []string{"serviceaccount/storage.(*TokenREST).Create"}},
	{"other POSTs: the benchmark's nodes and pods, the agents' Events", []string{"endpoints/handlers.createHandler", "endpoints/handlers.CreateResource"}},
	{"PATCH nodes, nodes/status: the agents' releases and conditions", []string{"endpoints/handlers.PatchResource", "endpoints/handlers.(*patcher)"}},
	{"LIST: the agents' EndpointSlices (their checks)", []string{"endpoints/handlers.ListResource"}},
	{"watches: each agent's of its node, the benchmark's of all", []string{"endpoints/handlers.serveWatch", "cacher.(*cacheWatcher)", "cacher.(*Cacher).dispatchEvent", "endpoints/handlers.(*WatchServer)", "cacher.(*watchCache)"}},
	{"GET: the agents' nodes and /readyz", []string{"endpoints/handlers.GetResource", "endpoints/handlers.getResourceHandler", "healthz.handleRootHealth", "healthz.(*healthzCheck)"}},
	{"authentication of each request (tokens, client certificates)", []string{"authentication/request", "pkg/serviceaccount.(*jwtTokenAuthenticator"}},
	{"API Priority and Fairness: queueing, seats, 429s", []string{"util/flowcontrol", "filters.(*priorityAndFairnessHandler)"}},
	{"HTTP/2 and writing responses", []string{"golang.org/x/net/http2", "net/http.(*conn)", "bufio.(*Writer)"}},
	{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcStart"}},
}

// attribute sums the profile's CPU samples per part of apiServerParts, and the rest.
func attribute(p *profile.Profile) (parts map[string]time.Duration, total time.Duration) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, 0
	}
	parts = map[string]time.Duration{}
	for _, s := range p.Sample {
		d := time.Duration(s.Value[idx])
		total += d
		parts[partOf(s)] += d
	}
	return parts, total
}

func partOf(s *profile.Sample) string {
	for _, part := range apiServerParts {
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				for _, f := range part.frames {
					if strings.Contains(line.Function.Name, f) {
						return part.name
					}
				}
			}
		}
	}
	return "other: the controllers' and scheduler's requests, etcd's client, the rest"
}

// reportProfile adds the API server's CPU of the burst by part.
func reportProfile(s *section, p *profile.Profile) {
	parts, total := attribute(p)
	if total == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The API server's CPU during the burst by what it served (its CPU profile, %s of samples over the whole burst; "+
		"a sample counts for the first row whose function is on its stack):\n\n| part | CPU | share |\n| --- | --- | --- |\n", secs(total))
	names := make([]string, 0, len(apiServerParts)+1)
	for _, part := range apiServerParts {
		names = append(names, part.name)
	}
	names = append(names, partOf(&profile.Sample{}))
	for _, name := range names {
		fmt.Fprintf(&b, "| %s | %s | %.0f%% |\n", name, secs(parts[name]), 100*parts[name].Seconds()/total.Seconds())
	}
	s.Notes = append(s.Notes, b.String())
}
