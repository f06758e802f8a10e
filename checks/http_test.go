package checks_test

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
)

func TestHTTP(t *testing.T) {
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		expect  string
		wantErr []string
	}{
		{name: "200", handler: status(http.StatusOK)},
		{name: "500", handler: status(http.StatusInternalServerError), wantErr: []string{"status 500 Internal Server Error, expected 2xx"}},
		{name: "204 against 200", handler: status(http.StatusNoContent), expect: "200", wantErr: []string{"status 204 No Content, expected 200"}},
		{name: "204 against 200,204", handler: status(http.StatusNoContent), expect: "200,204"},
		{name: "301 against 2xx,301 is followed", handler: redirectTo("/ok"), expect: "2xx,301"},
		{name: "redirect to 200", handler: redirectTo("/ok")},
		{name: "redirect to 500", handler: redirectTo("/fail"), wantErr: []string{"status 500 Internal Server Error", "(redirected to ", "/fail"}},
		{name: "redirect loop", handler: redirectTo("/loop"), wantErr: []string{"stopped after 10 redirects"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			expect, err := checks.ParseStatusMatcher(tt.expect)
			require.NoError(t, err)
			c := checks.NewHTTP(srv.URL+"/", expect, nil)
			requireIdentity(t, c, "http", srv.URL+"/")

			assertErrContains(t, checks.Execute(t.Context(), c, runTimeout).Err, tt.wantErr...)
		})
	}
}

// redirectTo redirects "/" to first and answers "/ok" with 200, "/fail" with
// 500 and "/loop" with a redirect to itself.
func redirectTo(first string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			http.Redirect(w, r, first, http.StatusMovedPermanently)
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}
}

func TestHTTPServerNeverAnswers(t *testing.T) {
	returned := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		defer close(returned)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	const timeout = 300 * time.Millisecond

	res := checks.Execute(t.Context(), checks.NewHTTP(srv.URL, checks.StatusMatcher{}, nil), timeout)

	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "timed out after 300ms")
	// A bound on correctness (the check ends with its context), not a speed goal.
	assert.Less(t, res.Duration, timeout+time.Second)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("handler still running: the client did not close the connection")
	}
}

func TestHTTPEndlessBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	const timeout = 10 * time.Second

	res := checks.Execute(t.Context(), checks.NewHTTP(srv.URL, checks.StatusMatcher{}, nil), timeout)

	assert.NoError(t, res.Err)
	// Reading the whole body would run into the timeout.
	assert.Less(t, res.Duration, timeout/2)
}

func TestParseStatusMatcher(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		match   []int
		noMatch []int
		wantErr string
	}{
		{in: "", want: "2xx", match: []int{200, 204, 299}, noMatch: []int{199, 301, 500}},
		{in: "2xx", want: "2xx", match: []int{200, 299}, noMatch: []int{300}},
		{in: "2XX", want: "2xx", match: []int{201}},
		{in: "200", want: "200", match: []int{200}, noMatch: []int{204}},
		{in: "200,204", want: "200,204", match: []int{200, 204}, noMatch: []int{201}},
		{in: "2xx, 301", want: "2xx,301", match: []int{250, 301}, noMatch: []int{302}},
		{in: "5xx", want: "5xx", match: []int{503}, noMatch: []int{200}},
		{in: "600", wantErr: `status "600": "600": want a code from 100 to 599 or a class "1xx" to "5xx"`},
		{in: "abc", wantErr: `"abc": want a code`},
		{in: "2x", wantErr: `"2x": want a code`},
		{in: "6xx", wantErr: `"6xx": want a code`},
		{in: "0xx", wantErr: `"0xx": want a code`},
		{in: "99", wantErr: `"99": want a code`},
		{in: "2000", wantErr: `"2000": want a code`},
		{in: "+20", wantErr: `"+20": want a code`},
		{in: "200,", wantErr: `status "200,": empty entry`},
		{in: ",200", wantErr: `empty entry`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, ok := parsed(t, checks.ParseStatusMatcher, tt.in, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, tt.want, m.String())
			for _, code := range tt.match {
				assert.True(t, m.Match(code), "%d", code)
			}
			for _, code := range tt.noMatch {
				assert.False(t, m.Match(code), "%d", code)
			}
			assertRoundTrips(t, checks.ParseStatusMatcher, m)
		})
	}
}

func TestNewHTTPClient(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	// The failing handshake of the system-roots case is expected.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	require.NoError(t, os.WriteFile(caFile, pemBytes, 0o600))
	noCert := filepath.Join(dir, "empty.pem")
	require.NoError(t, os.WriteFile(noCert, []byte("not a certificate\n"), 0o600))

	tests := []struct {
		name       string
		caFile     string
		wantNewErr string
		wantRunErr string
	}{
		{name: "CA file trusts the server", caFile: caFile},
		{name: "system roots do not", caFile: "", wantRunErr: "certificate"},
		{name: "missing file", caFile: filepath.Join(dir, "missing.pem"), wantNewErr: "read CA file: open " + filepath.Join(dir, "missing.pem")},
		{name: "file without a certificate", caFile: noCert, wantNewErr: "CA file " + noCert + ": no PEM certificate found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, err := checks.NewHTTPClient(tt.caFile)

			if tt.wantNewErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantNewErr)
				assert.Nil(t, client)
				return
			}
			require.NoError(t, err)
			assert.Zero(t, client.Timeout, "the context bounds requests")
			res := checks.Execute(t.Context(), checks.NewHTTP(srv.URL, checks.StatusMatcher{}, client), runTimeout)
			assertErrContains(t, res.Err, tt.wantRunErr)
		})
	}
}
