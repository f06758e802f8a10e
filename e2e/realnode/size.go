package realnode

import v1 "github.com/google/go-containerregistry/pkg/v1"

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
