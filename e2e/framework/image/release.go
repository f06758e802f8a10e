package image

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Source is where the agent's source lives, as its images say.
const Source = "https://github.com/nodeready/nodeready"

// The OCI annotations the agent image carries, on the index, on each image's manifest and as
// labels in each config (the Dockerfile's LABEL sets the same three).
const (
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationVersion  = "org.opencontainers.image.version"
)

// Release says what an agent image is a build of.
type Release struct {
	Source   string // the repository's URL
	Revision string // the commit
	Version  string // the release tag, or git describe for a development build
}

// Annotations are r as OCI annotations.
func (r Release) Annotations() map[string]string {
	return map[string]string{AnnotationSource: r.Source, AnnotationRevision: r.Revision, AnnotationVersion: r.Version}
}

func (r Release) validate() error {
	var errs []error
	for _, f := range []struct{ flag, value string }{{"source", r.Source}, {"revision", r.Revision}, {"version", r.Version}} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("the image's %s is empty", f.flag))
		}
	}
	return errors.Join(errs...)
}

// Platform is one image of the agent's index: a Linux architecture (amd64, arm64) and the
// static agent binary built for it.
type Platform struct {
	Arch   string
	Binary []byte
}

// AgentIndex builds the multi-arch agent image: for each platform the Dockerfile's runtime
// layout (Agent) with caCerts, labelled and annotated with r, in one OCI image index that
// carries r's annotations too. Platforms are sorted, so the same inputs always give the same
// digest, whatever order they come in.
func AgentIndex(r Release, caCerts []byte, platforms []Platform) (v1.ImageIndex, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if len(platforms) == 0 {
		return nil, errors.New("no platform to build")
	}
	platforms = slices.SortedFunc(slices.Values(platforms), func(a, b Platform) int { return cmp.Compare(a.Arch, b.Arch) })
	for i := 1; i < len(platforms); i++ {
		if platforms[i].Arch == platforms[i-1].Arch {
			return nil, fmt.Errorf("linux/%s given twice", platforms[i].Arch)
		}
	}
	adds := make([]mutate.IndexAddendum, 0, len(platforms))
	for _, p := range platforms {
		spec := Agent(p.Arch, p.Binary, caCerts)
		spec.Labels, spec.Annotations = r.Annotations(), r.Annotations()
		img, err := Build(spec)
		if err != nil {
			return nil, fmt.Errorf("linux/%s: %w", p.Arch, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: spec.OS, Architecture: spec.Architecture},
		}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, maps.Clone(r.Annotations())).(v1.ImageIndex), nil
}
