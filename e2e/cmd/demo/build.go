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

// scriptBuild is one of the repository's build scripts running, its progress lines read as
// they come: scripts/build-control-plane.sh before the fleet, and scripts/build-node.sh beside
// it, so the demo shows something as soon as the control plane is built: kubelet, containerd,
// CoreDNS and flanneld take minutes on a fresh machine, and only the real nodes need them.
type scriptBuild struct {
	start time.Time
	done  chan struct{}
	err   error

	mu    sync.Mutex
	lines []string // the script's progress lines, in order
}

// startNodeBuild starts scripts/build-node.sh in the repository root.
func startNodeBuild(ctx context.Context, root string) *scriptBuild {
	return startScript(ctx, root, "build-node")
}

// startScript starts scripts/NAME.sh in the repository root and reads its progress: the
// lines it writes to stderr prefixed with "NAME: ".
func startScript(ctx context.Context, root, name string) *scriptBuild {
	b := &scriptBuild{start: time.Now(), done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", name+".sh"))
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
			if rest, ok := strings.CutPrefix(line, name+": "); ok {
				b.mu.Lock()
				b.lines = append(b.lines, rest)
				b.mu.Unlock()
			}
			if tail = append(tail, line); len(tail) > 20 {
				tail = tail[1:]
			}
		}
		if err := cmd.Wait(); err != nil {
			b.err = fmt.Errorf("scripts/%s.sh: %w\n%s", name, err, strings.Join(tail, "\n"))
		}
	}()
	return b
}

// wait prints the build's progress lines as they come until it ends.
func (b *scriptBuild) wait(ctx context.Context, out io.Writer) error {
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
