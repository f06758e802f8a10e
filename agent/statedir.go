package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// firstStartFile, in STATE_DIR, holds the time the agent first started in
// this pod.
const firstStartFile = "first-start"

// firstStart returns the time from which INITIAL_TIMEOUT, FAIL_OPEN_AFTER and
// MIN_HOLD_TIME count: the first start recorded in dir, or started, which it
// records there when nothing is recorded yet. dir is an emptyDir of the pod,
// which outlives the container: an OOM kill or a liveness restart must not
// give a crash-looping agent a fresh timer, or it would never fail open. A
// new pod (a DaemonSet rollout, a re-verification) has a new emptyDir and
// starts afresh. With dir empty, or a record that cannot be used, it is
// started, and err says why when something was wrong.
func firstStart(dir string, started time.Time) (time.Time, error) {
	if dir == "" {
		return started, nil
	}
	path := filepath.Join(dir, firstStartFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := writeRecord(path, started.UTC().Format(time.RFC3339Nano)); err != nil {
			return started, fmt.Errorf("record first start (STATE_DIR): %w", err)
		}
		return started, nil
	case err != nil:
		return started, fmt.Errorf("read first start (STATE_DIR): %w", err)
	}
	first, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
	if err != nil {
		return started, fmt.Errorf("read first start from %s: %w", path, err)
	}
	if first.After(started) {
		return started, fmt.Errorf("first start %s recorded in %s is after this start", first.Format(time.RFC3339), path)
	}
	return first, nil
}

// roundsFile, in STATE_DIR, holds how many rounds of checks the agents of this
// pod have run, so that a container restarted in the pod counts MAX_RETRIES on:
// a node whose failure was recorded keeps saying so (ChecksFailed), instead of
// ChecksFailing again for MAX_RETRIES rounds as if it had just joined.
const roundsFile = "rounds"

// roundsBefore returns the rounds recorded in dir by earlier containers of the
// pod: 0 when dir is empty or nothing is recorded, and err says why when a
// record could not be used.
func roundsBefore(dir string) (int, error) {
	if dir == "" {
		return 0, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, roundsFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read rounds (STATE_DIR): %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("read rounds from %s: not a count: %q", filepath.Join(dir, roundsFile), strings.TrimSpace(string(data)))
	}
	return n, nil
}

// recordRounds records n rounds in dir.
func recordRounds(dir string, n int) error {
	if dir == "" {
		return nil
	}
	if err := writeRecord(filepath.Join(dir, roundsFile), strconv.Itoa(n)); err != nil {
		return fmt.Errorf("record rounds (STATE_DIR): %w", err)
	}
	return nil
}

// writeRecord writes value as the record at path, whole: into a temporary file
// renamed over it, so a container killed mid-write never leaves a half record.
func writeRecord(path, value string) error {
	if err := os.WriteFile(path+".tmp", []byte(value+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
