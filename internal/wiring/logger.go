package wiring

import (
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/nodeready/nodeready/internal/config"
)

// TimeFormat is the time of every line: RFC 3339 to the millisecond, so
// that the lines of one round, a few milliseconds apart, keep their order
// and durations between them can be read (zerolog's default is the second).
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// timestamp writes the time of a line in TimeFormat. It is a hook rather than
// zerolog.TimeFieldFormat, a global that in-process agents (e2e/cmd/bench)
// would race on.
var timestamp = zerolog.HookFunc(func(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().Format(TimeFormat))
})

// NewLogger builds the one root logger: JSON by default, LOG_FORMAT=console
// for people. Fields that hold for the whole run are bound here once.
func NewLogger(c config.Config, w io.Writer) zerolog.Logger {
	if c.LogFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	level, err := zerolog.ParseLevel(c.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel // unreachable after config.Load
	}
	ctx := zerolog.New(w).Level(level).Hook(timestamp).With()
	if c.NodeName != "" {
		ctx = ctx.Str("node", c.NodeName)
	}
	if c.PodName != "" {
		ctx = ctx.Str("pod", c.PodNamespace+"/"+c.PodName)
	}
	return ctx.Logger()
}
