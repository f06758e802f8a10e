// Command image builds the agent image without a Docker engine, the one build that `make image`,
// the release workflow and the real-node tests share: the runtime layout of the repository's
// Dockerfile (e2e/framework/image.Agent) for each platform, in one OCI image index annotated with
// its source, revision and version, written as an OCI layout directory and/or pushed to a registry
// with the credentials of the Docker config (~/.docker/config.json and its helpers).
//
//	go run ./cmd/image -version v0.1.0 -revision $(git rev-parse HEAD) \
//	    -binary linux/amd64=../bin/linux_amd64/nodeready,linux/arm64=../bin/linux_arm64/nodeready \
//	    -push ghcr.io/nodeready/nodeready:v0.1.0
//
// The binaries are built beforehand (CGO_ENABLED=0 GOOS=linux GOARCH=... go build -trimpath), as
// the Dockerfile's build stage does; `make image` does both. Every file and the image carry a
// fixed time, and the CA certificates come from the NSS store pinned in e2e/go.mod unless
// -ca-certs names a file, so the same binaries give the same digest on any machine.
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
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nodeready/nodeready/e2e/framework/image"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binaries := fs.String("binary", "", "linux/ARCH=PATH of the static agent binary, comma-separated for several platforms")
	var rel image.Release
	fs.StringVar(&rel.Version, "version", "", "the version the image is, its org.opencontainers.image.version (required)")
	fs.StringVar(&rel.Revision, "revision", "", "the commit it is built from, its org.opencontainers.image.revision (required)")
	fs.StringVar(&rel.Source, "source", image.Source, "the repository, its org.opencontainers.image.source")
	caCerts := fs.String("ca-certs", "", "a PEM file of CA certificates to put into the image instead of the pinned NSS roots")
	oci := fs.String("oci", "", "write the image index as an OCI layout into this directory")
	push := fs.String("push", "", "push the image index to this reference (registry/repository:tag)")
	insecure := fs.Bool("insecure", false, "the registry of -push speaks plain HTTP")
	digestFile := fs.String("digest-file", "", "write the index's digest (sha256:...) into this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "image: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *binaries == "" || (*oci == "" && *push == "") {
		fmt.Fprintln(stderr, "image: -binary and one of -oci or -push are required")
		return 2
	}
	var ref name.Reference
	if *push != "" {
		var opts []name.Option
		if *insecure {
			opts = append(opts, name.Insecure)
		}
		var err error
		if ref, err = name.ParseReference(*push, opts...); err != nil {
			fmt.Fprintf(stderr, "image: -push %q: %v\n", *push, err)
			return 2
		}
	}
	idx, err := build(rel, *binaries, *caCerts)
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	digest, err := idx.Digest()
	if err == nil && *oci != "" {
		if err = writeLayout(*oci, idx, rel.Version); err == nil {
			fmt.Fprintf(stdout, "wrote %s:%s@%s\n", *oci, rel.Version, digest)
		}
	}
	if err == nil && ref != nil {
		if err = remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err == nil {
			fmt.Fprintf(stdout, "pushed %s@%s\n", ref.Name(), digest)
		}
	}
	if err == nil && *digestFile != "" {
		err = os.WriteFile(*digestFile, []byte(digest.String()+"\n"), 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	return 0
}

// refName is the OCI layout's annotation for an entry's tag.
const refName = "org.opencontainers.image.ref.name"

// writeLayout writes an OCI layout whose index.json names the agent's index by tag, as
// `skopeo copy oci:DIR:TAG` and `crane push DIR` expect.
func writeLayout(dir string, idx v1.ImageIndex, tag string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: tag}))
}

// build makes the agent's index from -binary's linux/ARCH=PATH list.
func build(rel image.Release, binaries, caPath string) (v1.ImageIndex, error) {
	certs := image.NSSRoots()
	if caPath != "" {
		var err error
		if certs, err = os.ReadFile(caPath); err != nil {
			return nil, fmt.Errorf("CA certificates: %w", err)
		}
	}
	var platforms []image.Platform
	for spec := range strings.SplitSeq(binaries, ",") {
		platform, path, ok := strings.Cut(spec, "=")
		osName, arch, ok2 := strings.Cut(platform, "/")
		if !ok || !ok2 || osName != "linux" || arch == "" || path == "" {
			return nil, fmt.Errorf("-binary %q: want linux/ARCH=PATH (the agent runs on Linux only)", spec)
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := checkBinary(bin, arch); err != nil {
			return nil, fmt.Errorf("-binary %s: %s: %w", platform, path, err)
		}
		platforms = append(platforms, image.Platform{Arch: arch, Binary: bin})
	}
	return image.AgentIndex(rel, certs, platforms)
}
