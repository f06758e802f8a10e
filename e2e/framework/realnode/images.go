package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/nodeready/nodeready/e2e/framework/image"
)

// Images are the references of the images the node runs, in the registry.
type Images struct {
	Agent, Pause, CoreDNS string
	// AgentSize is the agent image's compressed size: config, manifest and layer.
	AgentSize int64
}

// PushImages builds the agent image from the binary at agentBin (the runtime layout of the
// Dockerfile, by image.AgentIndex as for a release), the sandbox image from e2e/cmd/pause and a CoreDNS image, and pushes them.
func PushImages(ctx context.Context, reg *Registry, agentBin, workDir string) (Images, error) {
	arch := runtime.GOARCH
	var imgs Images
	agent, err := os.ReadFile(agentBin)
	if err != nil {
		return imgs, fmt.Errorf("agent binary: %w", err)
	}
	// The agent's image as `make image` and the release build it (a one-platform index here),
	// so the node's containerd resolves an index to its platform as a user's does.
	agentIdx, err := image.AgentIndex(image.Release{Source: image.Source, Revision: "e2e", Version: "e2e"},
		image.NSSRoots(), []image.Platform{{Arch: arch, Binary: agent}})
	if err != nil {
		return imgs, fmt.Errorf("build nodeready:e2e: %w", err)
	}
	if imgs.Agent, err = reg.PushIndex(ctx, "nodeready:e2e", agentIdx); err != nil {
		return imgs, err
	}
	if imgs.AgentSize, err = indexSize(agentIdx, arch); err != nil {
		return imgs, err
	}
	pauseBin := filepath.Join(workDir, "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", pauseBin, "github.com/nodeready/nodeready/e2e/cmd/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return imgs, fmt.Errorf("build pause: %w: %s", err, out)
	}
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		return imgs, err
	}
	corednsPath, err := CoreDNSBinary()
	if err != nil {
		return imgs, err
	}
	coredns, err := os.ReadFile(corednsPath)
	if err != nil {
		return imgs, err
	}
	for _, b := range []struct {
		repo string
		spec image.Spec
		ref  *string
	}{
		{"pause:e2e", image.Binary(arch, "pause", pause, "65535:65535"), &imgs.Pause},
		{"coredns:e2e", image.Binary(arch, "coredns", coredns, "65532:65532"), &imgs.CoreDNS},
	} {
		img, err := image.Build(b.spec)
		if err != nil {
			return imgs, fmt.Errorf("build %s: %w", b.repo, err)
		}
		if *b.ref, err = reg.Push(ctx, b.repo, img); err != nil {
			return imgs, err
		}
	}
	return imgs, nil
}
