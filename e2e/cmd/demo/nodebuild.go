package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// nodeBuild is scripts/build-node.sh running beside the simulated fleet, so the demo shows
// something as soon as the control plane is built: kubelet, containerd, CoreDNS and flanneld
// take minutes on a fresh machine, and only the real nodes need them.
type nodeBuild struct {
	start time.Time
	done  chan struct{}
	err   error

	mu    sync.Mutex
	lines []string // the script's progress lines, in order
}

// startNodeBuild starts the build in the repository root and reads its progress.
func startNodeBuild(ctx context.Context, root string) *nodeBuild {
	b := &nodeBuild{start: time.Now(), done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "build-node.sh"))
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		b.err = err
		close(b.done)
		return b
	}
	go func() {
		defer close(b.done)
		sc := bufio.NewScanner(stderr)
		var tail []string // what a failed build said last
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "build-node: ") {
				b.mu.Lock()
				b.lines = append(b.lines, strings.TrimPrefix(line, "build-node: "))
				b.mu.Unlock()
			}
			if tail = append(tail, line); len(tail) > 20 {
				tail = tail[1:]
			}
		}
		if err := cmd.Wait(); err != nil {
			b.err = fmt.Errorf("scripts/build-node.sh: %w\n%s", err, strings.Join(tail, "\n"))
		}
	}()
	return b
}

// wait prints the build's progress lines as they come until it ends.
func (b *nodeBuild) wait(ctx context.Context, out io.Writer) error {
	shown := 0
	show := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for ; shown < len(b.lines); shown++ {
			fmt.Fprintf(out, "  %6.0fs  %s\n", time.Since(b.start).Seconds(), b.lines[shown])
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		show()
		select {
		case <-b.done:
			show()
			return b.err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
