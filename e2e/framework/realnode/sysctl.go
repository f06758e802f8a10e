package realnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// kernelTunables are the machine-wide sysctls the kubelet sets at start (it has no setting
// that leaves them alone): they are saved before the kubelet starts and put back by Stop, or
// by the next Prepare after a run that was killed.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// savedTunables holds the values from before the kubelet, until they are put back.
const savedTunables = "/tmp/nodeready-realnode-sysctls"

// saveTunables records the current values, unless a killed run left its record (which holds
// the values from before that run).
func saveTunables() error {
	if _, err := os.Stat(savedTunables); err == nil {
		return nil
	}
	var b strings.Builder
	for _, k := range kernelTunables {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("read sysctl: %w", err)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(savedTunables, []byte(b.String()), 0o644)
}

// restoreTunables puts the recorded values back and removes the record.
func restoreTunables() error {
	data, err := os.ReadFile(savedTunables)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s: %w", k, err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(savedTunables))
	}
	return errors.Join(errs...)
}
