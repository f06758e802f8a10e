package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// slowProxy stands between the agents and the API server as a network with a round trip of
// delay would: it holds every request that long, then passes it on. It terminates TLS with
// a certificate of its own (caFile trusts it) and passes the agent's bearer token on, so the
// API server authenticates and authorizes the agent as it would directly. Watches stream
// through unbuffered. It counts the requests it passes on, as requests.go names them.
type slowProxy struct {
	URL, Host, Port string
	caFile          string
	requests        *requestCounter
	server          *http.Server
}

// startSlowProxy serves on 127.0.0.1 in front of upstream (the API server, trusted through
// upstreamCA), holding each request for delay. Its certificate and CA go into dir.
func startSlowProxy(upstream, upstreamCA, dir string, delay time.Duration) (*slowProxy, error) {
	target, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(upstreamCA)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", upstreamCA)
	}
	cert, caFile, err := selfSigned(dir)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p := &slowProxy{URL: "https://" + ln.Addr().String(), Host: host, Port: port, caFile: caFile, requests: newRequestCounter()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
			MaxIdleConns:      100,
			IdleConnTimeout:   90 * time.Second,
		},
		FlushInterval: -1,
		// A watch that the agent ends is an error to the proxy; not to the benchmark.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	counted := p.requests.wrap(roundTripFunc(rp.Transport.RoundTrip))
	rp.Transport = counted
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
			rp.ServeHTTP(w, r)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		// The tcp check opens a connection and closes it without a handshake.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		if err := p.server.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "bench: slow proxy: %v\n", err)
		}
	}()
	return p, nil
}

func (p *slowProxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.server.Shutdown(ctx); err != nil {
		p.server.Close()
	}
}

// selfSigned makes a certificate for 127.0.0.1 that is its own CA, and writes the CA file.
func selfSigned(dir string) (tls.Certificate, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nodeready-bench-proxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	caFile := filepath.Join(dir, "proxy-ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return tls.Certificate{}, "", err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile, nil
}
