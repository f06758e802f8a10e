package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"time"
)

// verifiedLine is the agent's own account of a verification: the fields of its
// "Verified node" log line. Every duration is measured inside the agent from the start of
// main: start-up ends when the first round of checks begins, the checks end when the last
// round's do, and the release ends when the PATCH answer confirms the node (before the settle
// window).
type verifiedLine struct {
	Total   time.Duration // duration_seconds
	Startup time.Duration // startup_seconds
	Checks  time.Duration // checks_seconds
	Release time.Duration // release_seconds
}

var errNoVerifiedLine = errors.New(`no "Verified node" line in the agent's log`)

// parseVerified finds the "Verified node" line in an agent's JSON log.
func parseVerified(log []byte) (verifiedLine, error) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var l struct {
			Message string  `json:"message"`
			Total   float64 `json:"duration_seconds"`
			Startup float64 `json:"startup_seconds"`
			Checks  float64 `json:"checks_seconds"`
			Release float64 `json:"release_seconds"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Message != "Verified node" {
			continue
		}
		return verifiedLine{Total: seconds(l.Total), Startup: seconds(l.Startup), Checks: seconds(l.Checks), Release: seconds(l.Release)}, nil
	}
	return verifiedLine{}, errNoVerifiedLine
}

func parseVerifiedFile(path string) (verifiedLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return verifiedLine{}, err
	}
	return parseVerified(data)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// phases collects the agent's own accounts of many verifications.
type phases struct {
	total, startup, checks, release, overhead durations
}

func (p *phases) add(v verifiedLine) {
	p.total = append(p.total, v.Total)
	p.startup = append(p.startup, v.Startup)
	p.checks = append(p.checks, v.Checks)
	p.release = append(p.release, v.Release)
	// Beyond the checks: what the agent adds to the slowest check (its checks run at once).
	p.overhead = append(p.overhead, v.Total-v.Checks)
}

// rows adds the phases to s, each as p50/p95/max.
func (p *phases) rows(s *section, prefix string) {
	s.add(prefix+"start to confirmed release (duration_seconds)", p.total.summary(false))
	s.add(prefix+"start-up: main to first round (startup_seconds)", p.startup.summary(false))
	s.add(prefix+"checks: the round's wall time (checks_seconds)", p.checks.summary(false))
	s.add(prefix+"release: checks passed to confirmed release (release_seconds)", p.release.summary(false))
}
