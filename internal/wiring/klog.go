package wiring

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// RouteClientGoLogs sends what client-go logs through klog (the node
// watch's reflector retrying a list or a watch, a client's throttling) to
// log, so that the agent's stderr is one stream of JSON lines and not JSON
// with klog's text between them. klog is one per process: main calls it
// once, before any client exists, as klog.SetLogger requires. A logr sink
// over zerolog takes a few kilobytes of the binary; klog and logr are linked
// with client-go anyway.
func RouteClientGoLogs(log zerolog.Logger) {
	log = log.With().Str("source", "client-go").Logger()
	// Contextual: client-go's loggers from klog.FromContext call the sink
	// directly, so LOG_LEVEL decides their verbosity (klogSink.Enabled).
	klog.SetLoggerWithOptions(logr.New(&klogSink{log: log}), klog.ContextualLogger(true))
}

// WarningHandler writes the warnings the API server sends in responses (a
// deprecated API, a field it dropped) to log at Warn, where client-go's own
// handler would print them through klog as text.
func WarningHandler(log zerolog.Logger) rest.WarningHandler {
	return warningLogger{log.With().Str("source", "client-go").Logger()}
}

type warningLogger struct{ log zerolog.Logger }

// HandleWarningHeader follows client-go's WarningLogger: only code 299
// carries a warning meant for people.
func (w warningLogger) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.log.Warn().Str("warning", text).Msg("API server sent a warning")
}

// klogSink is a logr.LogSink that writes to a zerolog.Logger.
type klogSink struct {
	log  zerolog.Logger
	name string
}

var _ logr.LogSink = (*klogSink)(nil)

// level is the zerolog level of a logr verbosity: 0 is client-go's Info, 1 to
// 3 the detail an operator may want (Debug), 4 and above the requests and
// the reflector's every step (Trace).
func level(v int) zerolog.Level {
	switch {
	case v <= 0:
		return zerolog.InfoLevel
	case v < 4:
		return zerolog.DebugLevel
	}
	return zerolog.TraceLevel
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(v int) bool { return level(v) >= s.log.GetLevel() }

func (s *klogSink) Info(v int, msg string, kv ...any) {
	s.write(s.log.WithLevel(level(v)), msg, kv)
}

// Error is at Warn: client-go retries what it logs as an error (a failed
// list or watch of the reflector, with its own backoff), and the agent,
// which decides when to give up, logs its own Error then.
func (s *klogSink) Error(err error, msg string, kv ...any) {
	s.write(s.log.Warn().Err(err), msg, kv)
}

func (s *klogSink) write(e *zerolog.Event, msg string, kv []any) {
	if e == nil {
		return
	}
	if s.name != "" {
		e = e.Str("logger", s.name)
	}
	e.Fields(fields(kv)).Msg(strings.TrimSuffix(msg, "\n"))
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{log: s.log.With().Fields(fields(kv)).Logger(), name: s.name}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &klogSink{log: s.log, name: name}
}

// fields turns logr's key-value pairs into zerolog's: an object that
// marshals itself for logs (klog.KObj) as it says, as klog's JSON format
// does, an error or another Stringer as its text, anything else as JSON.
func fields(kv []any) map[string]any {
	if len(kv) == 0 {
		return nil
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		var v any = "(missing)"
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		if lm, ok := v.(logr.Marshaler); ok {
			v = lm.MarshalLog()
		}
		switch t := v.(type) {
		case error:
			v = t.Error()
		case fmt.Stringer:
			v = t.String()
		}
		m[key] = v
	}
	return m
}
