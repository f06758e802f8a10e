package report

import "time"

// The pod's last seconds. The release's label makes the DaemonSet controller
// delete the pod: the SIGTERM comes after the release has started, and the
// SIGKILL TerminationGracePeriod after the SIGTERM. So whatever the agent
// does once the release starts (the release, the condition and the Events
// that report it) must end within TerminationGracePeriod of that start; these
// budgets add up to no more than that.

// TerminationGracePeriod is the DaemonSet's terminationGracePeriodSeconds
// (manifests/03-daemonset.yaml and the chart; a test holds them equal).
const TerminationGracePeriod = 30 * time.Second

// exitMargin is left of the grace period for the process to exit.
const exitMargin = 3 * time.Second

// afterBudget bounds each of the release and the writes that follow it
// (settle window aside): they run on after the SIGTERM that the release
// itself brings.
const afterBudget = 5 * time.Second

// ConfirmBudget is kept back from the release's write for finding out, by
// one read, whether a write that got no answer landed.
const ConfirmBudget = 2 * time.Second

// lastFlushBudget bounds the last try at a pending condition after the
// SIGTERM (ConditionWriter.LastFlush); with the release budget and the
// longest settle window it stays inside the grace period.
const lastFlushBudget = 3 * time.Second

// ReleaseBudget bounds the release, the condition and the Event that report
// it, and the settle window, from the release's start.
func ReleaseBudget(settle time.Duration) time.Duration {
	return 2*afterBudget + settle
}

// mustSendBudget is the time an Event that matters has from its emission to
// be written. The Event is emitted within the release's budget, so it is
// written, or its loss logged, before the grace period ends, with
// exitMargin to spare.
func mustSendBudget(settle time.Duration) time.Duration {
	return TerminationGracePeriod - ReleaseBudget(settle) - exitMargin
}

// ServerStopBudget bounds the metrics server's shutdown after the final
// scrape: a scrape under way finishes its answer within it.
const ServerStopBudget = 1 * time.Second

// FinalScrapeBudget is the longest wait for the final scrape, counted from
// the SIGTERM (config.MaxFinalScrapeTimeout): the server's shutdown, the
// Events' last flush and the exit margin follow it inside the grace period.
// Events that matter are waited for to their own budget from their emission
// (mustSendBudget), which ends by the margin after the release's start, and
// the release starts before the SIGTERM it brings: within it too.
func FinalScrapeBudget() time.Duration {
	return TerminationGracePeriod - exitMargin - flushBudget - ServerStopBudget
}
