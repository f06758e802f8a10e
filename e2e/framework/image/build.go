package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is everything an image holds: the files of its one layer and its config.
type Spec struct {
	OS, Architecture string // linux, amd64
	Files            []File
	User             string // "65532:65532"
	Entrypoint       []string
	Env              []string
	WorkingDir       string
	// Labels go into the config (what a Dockerfile's LABEL sets); Annotations into the
	// manifest, where registries and cosign read them.
	Labels, Annotations map[string]string
}

// File is one entry of the layer. A directory has Dir set and no Data.
type File struct {
	Path     string // absolute, such as /nodeready
	Mode     int64  // permission bits, such as 0o755
	UID, GID int
	Dir      bool
	Data     []byte
}

// epoch is the time of every file and of the image: the same inputs give the same digest.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image of s.
func Build(s Spec) (v1.Image, error) {
	layerTar, err := tarFiles(s.Files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{CreatedBy: "nodeready e2e/image", Created: v1.Time{Time: epoch}}})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = s.OS, s.Architecture
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = s.User
	cf.Config.Entrypoint = s.Entrypoint
	cf.Config.Env = s.Env
	cf.Config.WorkingDir = s.WorkingDir
	cf.Config.Labels = s.Labels
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	if len(s.Annotations) > 0 {
		img = mutate.Annotations(img, s.Annotations).(v1.Image)
	}
	return img, nil
}

// tarFiles writes the layer, parents before children as the files are listed.
func tarFiles(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		name := f.Path[1:] // layer paths are relative to the root
		h := &tar.Header{Name: name, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: epoch, Format: tar.FormatPAX}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Files reads an image's one layer back, as Build wrote it: its files by absolute path.
func Files(img v1.Image) (map[string]File, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	files := map[string]File{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		f := File{Path: "/" + strings.TrimSuffix(h.Name, "/"), Mode: h.Mode, UID: h.Uid, GID: h.Gid, Dir: h.Typeflag == tar.TypeDir}
		if h.Typeflag == tar.TypeReg {
			if f.Data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		files[f.Path] = f
	}
}
