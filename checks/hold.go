package checks

import (
	"context"
	"fmt"
	"time"
)

var _ Check = (*Hold)(nil)

// Hold passes once a minimum time has gone by since the agent started: it
// keeps the node tainted for caches and agents that need time to warm up
// and offer nothing to probe. It never sleeps; the agent's rounds come back
// to it.
type Hold struct {
	min   time.Duration
	start time.Time
}

// NewHold returns a check that passes once min has gone by since start.
func NewHold(min time.Duration, start time.Time) *Hold {
	return &Hold{min: min, start: start}
}

// Name implements Check.
func (c *Hold) Name() string { return "hold" }

// Target implements Check.
func (c *Hold) Target() string { return c.min.String() }

// Run implements Check.
func (c *Hold) Run(context.Context) error {
	held := time.Since(c.start)
	if held >= c.min {
		return nil
	}
	unit := time.Second
	if c.min < 10*time.Second {
		unit = time.Millisecond
	}
	return fmt.Errorf("held %s of %s", held.Truncate(unit), c.min)
}
