package plugin

import (
	"flag"
	"fmt"
	"strconv"

	"k8s.io/klog/v2"
)

// setVerbosity applies -v: the plugin's own lines from 1, and klog's level for client-go,
// whose request logging (the URL and status from 6, headers from 7, bodies from 8) is what
// kubectl's -v shows, onto the plugin's stderr.
func (o *Options) setVerbosity() error {
	if o.verbosity < 0 {
		return fmt.Errorf("-v %d: use 0 or more", o.verbosity)
	}
	if o.verbosity == 0 {
		return nil
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	// SetOutput takes effect without logtostderr; one_output writes each line once, not
	// once per severity at and below its own.
	for name, value := range map[string]string{"v": strconv.Itoa(o.verbosity), "logtostderr": "false", "alsologtostderr": "false", "one_output": "true"} {
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("-v %d: %w", o.verbosity, err)
		}
	}
	klog.SetOutput(o.streams.ErrOut)
	return nil
}
