package wiring

import (
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/nodeready/nodeready/internal/config"
)

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
	ctx := zerolog.New(w).Level(level).With().Timestamp()
	if c.NodeName != "" {
		ctx = ctx.Str("node", c.NodeName)
	}
	if c.PodName != "" {
		ctx = ctx.Str("pod", c.PodNamespace+"/"+c.PodName)
	}
	return ctx.Logger()
}
