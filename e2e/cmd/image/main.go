// Command image builds the agent image without a Docker engine: the runtime layout of the
// repository's Dockerfile (e2e/image.Agent) for one or more platforms, as an image index, and
// writes it as an OCI layout directory or pushes it to a registry.
//
//	go run ./cmd/image -binary linux/amd64=../bin/nodeready -oci ../bin/image
//	go run ./cmd/image -binary linux/amd64=out/amd64/nodeready,linux/arm64=out/arm64/nodeready -push registry.example.com/nodeready:v0.1.0
//
// The binaries are built beforehand (CGO_ENABLED=0 GOOS=linux GOARCH=...), as the Dockerfile's
// build stage does; the CA certificates come from -ca-certs (the build machine's by default).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeready/nodeready/e2e/image"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binaries := fs.String("binary", "", "os/arch=path of the static agent binary, comma-separated for several platforms")
	caCerts := fs.String("ca-certs", image.CABundle, "the CA certificates to put into the image")
	oci := fs.String("oci", "", "write the image index as an OCI layout into this directory")
	push := fs.String("push", "", "push the image index to this reference")
	insecure := fs.Bool("insecure", false, "the registry of -push speaks plain HTTP")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *binaries == "" || (*oci == "" && *push == "") {
		fmt.Fprintln(stderr, "image: -binary and one of -oci or -push are required")
		return 2
	}
	idx, err := build(*binaries, *caCerts)
	if err == nil && *oci != "" {
		_, err = layout.Write(*oci, idx)
	}
	if err == nil && *push != "" {
		var opts []name.Option
		if *insecure {
			opts = append(opts, name.Insecure)
		}
		var ref name.Reference
		if ref, err = name.ParseReference(*push, opts...); err == nil {
			err = remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	return 0
}

// build makes an index with one image per os/arch=path.
func build(binaries, caPath string) (v1.ImageIndex, error) {
	certs, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	var adds []mutate.IndexAddendum
	for spec := range strings.SplitSeq(binaries, ",") {
		platform, path, ok := strings.Cut(spec, "=")
		osName, arch, ok2 := strings.Cut(platform, "/")
		if !ok || !ok2 || osName != "linux" {
			return nil, fmt.Errorf("-binary %q: want linux/ARCH=PATH", spec)
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		img, err := image.Build(image.Agent(arch, bin, certs))
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}
