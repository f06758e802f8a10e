package checks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*HTTP)(nil)

// maxBodyDrain bounds how much of a response body a check reads. The verdict
// rests on the status code; the body is read only so that a normal response
// completes, and an endless or huge body can neither hold the check until its
// timeout nor grow the agent's memory.
const maxBodyDrain = 64 << 10

// HTTP passes when a GET of one URL answers with an expected status.
//
// Redirects are followed as by Go's default client, up to 10, and the status
// of the final response is the one compared; a redirect loop fails.
type HTTP struct {
	url    string
	expect StatusMatcher
	client *http.Client
	// clock tells a certificate outside its validity by this node's clock
	// whether it is within it by the API server's (certificateError).
	clock *kube.Clock
}

// NewHTTP returns a check that GETs url with client and compares the status
// with expect (the zero StatusMatcher means 2xx). A nil client means one from
// NewHTTPClient("").
func NewHTTP(url string, expect StatusMatcher, client *http.Client) *HTTP {
	if client == nil {
		client = &http.Client{Transport: newTransport(nil)}
	}
	return &HTTP{url: url, expect: expect, client: client}
}

// WithClock judges a certificate "expired" or "not yet valid" by the API
// server's clock, as clock records it, and returns c.
func (c *HTTP) WithClock(clock *kube.Clock) *HTTP {
	c.clock = clock
	return c
}

// Name implements Check.
func (c *HTTP) Name() string { return string(NameHTTP) }

// Target implements Check.
func (c *HTTP) Target() string { return c.url }

// Run implements Check.
func (c *HTTP) Run(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return fmt.Errorf("request %q: %w", c.url, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// *url.Error already reads `Get "https://...": <cause>`.
		if untrusted(err) {
			return certificateError(err, c.clock)
		}
		return err
	}
	defer resp.Body.Close()
	// The status is known; a body that fails or stalls is not the check's
	// concern, so read errors are ignored.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyDrain))
	if !c.expect.Match(resp.StatusCode) {
		via := ""
		if final := resp.Request.URL.String(); final != c.url {
			via = fmt.Sprintf(" (redirected to %q)", final)
		}
		return fmt.Errorf("get %q: status %s%s, expected %s", c.url, resp.Status, via, c.expect)
	}
	return nil
}

// NewHTTPClient returns the client for HTTP checks. With an empty caFile it
// trusts the system roots; otherwise it trusts only the PEM certificates in
// caFile, so a pass proves the server chains to that CA. Keep-alives are off
// so that every run dials, and for HTTPS handshakes, afresh instead of
// reusing a connection from an earlier round. There is no client Timeout:
// Execute's context bounds every request.
func NewHTTPClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return &http.Client{Transport: newTransport(nil)}, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate found", caFile)
	}
	return &http.Client{Transport: newTransport(pool)}, nil
}

// newTransport is Go's default transport without keep-alives, trusting roots
// (the system roots when nil).
func newTransport(roots *x509.CertPool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	if roots != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return t
}

// StatusMatcher is a set of accepted HTTP status codes, written like "2xx",
// "200", "200,204" or "2xx,301". The zero value accepts 2xx.
type StatusMatcher struct {
	ranges []statusRange
}

type statusRange struct{ lo, hi int }

// ParseStatusMatcher parses a comma-separated list of status codes (100 to
// 599) and classes ("1xx" to "5xx"). An empty string means "2xx".
func ParseStatusMatcher(s string) (StatusMatcher, error) {
	if strings.TrimSpace(s) == "" {
		s = "2xx"
	}
	var m StatusMatcher
	for term := range strings.SplitSeq(s, ",") {
		r, err := parseStatusTerm(strings.TrimSpace(term))
		if err != nil {
			return StatusMatcher{}, fmt.Errorf("status %q: %w", s, err)
		}
		m.ranges = append(m.ranges, r)
	}
	return m, nil
}

func parseStatusTerm(t string) (statusRange, error) {
	const want = `want a code from 100 to 599 or a class "1xx" to "5xx"`
	if t == "" {
		return statusRange{}, fmt.Errorf("empty entry, %s", want)
	}
	if len(t) == 3 && strings.EqualFold(t[1:], "xx") {
		if t[0] < '1' || t[0] > '5' {
			return statusRange{}, fmt.Errorf("%q: %s", t, want)
		}
		lo := int(t[0]-'0') * 100
		return statusRange{lo, lo + 99}, nil
	}
	code, err := strconv.Atoi(t)
	if err != nil || len(t) != 3 || code < 100 || code > 599 {
		return statusRange{}, fmt.Errorf("%q: %s", t, want)
	}
	return statusRange{code, code}, nil
}

// Match reports whether code is accepted.
func (m StatusMatcher) Match(code int) bool {
	if len(m.ranges) == 0 {
		return code >= 200 && code <= 299
	}
	for _, r := range m.ranges {
		if code >= r.lo && code <= r.hi {
			return true
		}
	}
	return false
}

// String returns the matcher in the form ParseStatusMatcher accepts.
func (m StatusMatcher) String() string {
	if len(m.ranges) == 0 {
		return "2xx"
	}
	parts := make([]string, len(m.ranges))
	for i, r := range m.ranges {
		if r.lo == r.hi {
			parts[i] = strconv.Itoa(r.lo)
		} else {
			parts[i] = strconv.Itoa(r.lo/100) + "xx"
		}
	}
	return strings.Join(parts, ",")
}

// HTTPOptions are the http check's variables.
type HTTPOptions struct {
	URLs           envvar.List `envconfig:"HTTP_URLS" desc:"http: URLs to GET; required when CHECKS has http"`
	ExpectedStatus string      `envconfig:"HTTP_EXPECTED_STATUS" default:"2xx" desc:"http: accepted status codes, such as 2xx, 200 or 200,204"`
	CAFile         string      `envconfig:"HTTP_CA_FILE" desc:"http: PEM file of CA certificates to trust instead of the system roots"`

	// Expect and Client are what Validate read: the accepted statuses, and the
	// client that trusts HTTP_CA_FILE's certificates, or the system roots.
	Expect StatusMatcher `ignored:"true"`
	Client *http.Client  `ignored:"true"`
}

// Validate implements KindOptions. It reads HTTP_CA_FILE, once: the http
// checks use the client it makes.
func (o *HTTPOptions) Validate(_ *Options, use Use) (err error) {
	if use.Selected && len(o.URLs) == 0 {
		return envvar.Required("HTTP_URLS", "CHECKS has http: a comma-separated list of http:// or https:// URLs")
	}
	for _, raw := range o.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &envvar.Error{Var: "HTTP_URLS", Value: raw, Accepted: "not a URL: use http://host[:port]/path or https://..."}
		}
	}
	if o.Expect, err = ParseStatusMatcher(o.ExpectedStatus); err != nil {
		return &envvar.Error{Var: "HTTP_EXPECTED_STATUS", Value: o.ExpectedStatus, Accepted: "use status codes or classes, comma-separated, such as 2xx, 200 or 200,204"}
	}
	if o.Client, err = NewHTTPClient(o.CAFile); err != nil {
		return &envvar.Error{Var: "HTTP_CA_FILE", Value: o.CAFile, Accepted: fmt.Sprintf("must be a readable PEM file with at least one certificate (%v)", err)}
	}
	return nil
}

// Checks implements KindOptions: one check per URL.
func (o *HTTPOptions) Checks(_ *Options, env Env) []Check {
	list := make([]Check, len(o.URLs))
	for i, u := range o.URLs {
		list[i] = NewHTTP(u, o.Expect, o.Client).WithClock(kube.ClockOf(env.Client))
	}
	return list
}
