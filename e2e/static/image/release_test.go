package image_test

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework/image"
)

// TestNSSRoots: every block is a CA certificate that parses.
func TestNSSRoots(t *testing.T) {
	rest := image.NSSRoots()
	n := 0
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		assert.True(t, c.IsCA, c.Subject.String())
		n++
	}
	assert.Empty(t, rest, "nothing but PEM certificates")
	assert.Greater(t, n, 100)
}

// TestAgentIndexNeedsRelease: an image that cannot say what it is a build of is refused.
func TestAgentIndexNeedsRelease(t *testing.T) {
	_, err := image.AgentIndex(image.Release{Source: image.Source}, nil, []image.Platform{{Arch: "amd64", Binary: []byte("b")}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the image's revision is empty")
	assert.Contains(t, err.Error(), "the image's version is empty")
	_, err = image.AgentIndex(image.Release{Source: image.Source, Revision: "r", Version: "v"}, nil, nil)
	assert.EqualError(t, err, "no platform to build")
}
