package realnode

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// compressedSize is what a pull transfers: manifest, config and compressed layers.
func compressedSize(img v1.Image) (int64, error) {
	m, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	c, err := img.RawConfigFile()
	if err != nil {
		return 0, err
	}
	size := int64(len(m) + len(c))
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		size += s
	}
	return size, nil
}

// indexSize is what pulling idx for arch transfers: the index and that platform's image.
func indexSize(idx v1.ImageIndex, arch string) (int64, error) {
	raw, err := idx.RawManifest()
	if err != nil {
		return 0, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return 0, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Architecture == arch {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return 0, err
			}
			size, err := compressedSize(img)
			return int64(len(raw)) + size, err
		}
	}
	return 0, fmt.Errorf("the index has no image for %s", arch)
}
