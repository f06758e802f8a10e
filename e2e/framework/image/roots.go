package image

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// NSSRoots returns the CA certificates of the Mozilla NSS trust store, as PEM, at the version
// of golang.org/x/crypto/x509roots/fallback that e2e/go.mod pins: the same bytes on every
// build machine, so the release image is reproducible anywhere. Debian's ca-certificates,
// which distroless copies, comes from the same store. Roots that NSS trusts only with a
// constraint (distrust after a date) are left out, as a PEM bundle cannot carry it.
func NSSRoots() []byte {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}) // a bytes.Buffer never fails
	}
	return buf.Bytes()
}
