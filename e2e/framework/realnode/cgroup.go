package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CgroupRoot is the kubelet's cgroupRoot of a single node, and the parent of the daemons'
// cgroup: everything the node runs is below it in every hierarchy. The nodes of a Nodes set
// each have node-<index> below it (nodeCgroup) and the set's underlay has underlay/.
const CgroupRoot = "/nodeready-realnode"

// nodeCgroup is node i's cgroup root in a set of nodes.
func nodeCgroup(i int) string { return CgroupRoot + "/node-" + strconv.Itoa(i) }

// daemonsCgroup holds containerd, kubelet, kube-proxy and the shims containerd starts.
func daemonsCgroup(root string) string { return root + "/daemons" }

// hierarchies returns the mount points of the cgroup hierarchies: every v1 hierarchy, and the
// v2 one that a hybrid setup mounts beside them (runc and the kubelet create cgroups there too).
func hierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 2 && (fields[2] == "cgroup" || fields[2] == "cgroup2") {
			dirs = append(dirs, fields[1])
		}
	}
	if len(dirs) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted")
	}
	return dirs, sc.Err()
}

// createCgroups creates CgroupRoot, root below it and root's daemons' cgroup in every
// hierarchy. A new cpuset cgroup starts with no CPUs and memory nodes; it gets its parent's.
func createCgroups(root string) error {
	cgs := []string{CgroupRoot}
	if root != CgroupRoot {
		cgs = append(cgs, root)
	}
	cgs = append(cgs, daemonsCgroup(root))
	dirs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		for _, cg := range cgs {
			dir := filepath.Join(h, cg)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("create cgroup: %w", err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
				if err != nil {
					continue // not the cpuset hierarchy
				}
				if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", f, err)
				}
			}
		}
	}
	return nil
}

// joinDaemons moves pid into the daemons' cgroup of root in every hierarchy, so that what it
// starts (containerd's shims) can be found and stopped.
func joinDaemons(pid int, root string) error {
	dirs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		if err := os.WriteFile(filepath.Join(h, daemonsCgroup(root), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	return nil
}

// pidsUnder lists the processes in a cgroup directory and below.
func pidsUnder(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(path)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	slices.Sort(pids)
	return slices.Compact(pids)
}

// cleanCgroups kills every process under root (CgroupRoot, or one node's of a set) and
// removes its cgroups, deepest first, in every hierarchy. It is what Stop does last and what
// Prepare does first (with CgroupRoot), after a run that was killed.
func cleanCgroups(root string) error {
	dirs, err := hierarchies()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, h := range dirs {
		root := filepath.Join(h, root)
		for {
			pids := pidsUnder(root)
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("processes %v under %s survive SIGKILL", pids, root)
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var cgs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				cgs = append(cgs, path)
			}
			return nil
		})
		for _, cg := range slices.Backward(cgs) {
			if err := os.Remove(cg); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove cgroup: %w", err)
			}
		}
	}
	return nil
}
