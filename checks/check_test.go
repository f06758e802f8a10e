package checks_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
)

// funcCheck is a Check made of a function, for tests of Execute and RunAll.
type funcCheck struct {
	name, target string
	run          func(ctx context.Context) error
}

func (c funcCheck) Name() string                  { return c.name }
func (c funcCheck) Target() string                { return c.target }
func (c funcCheck) Run(ctx context.Context) error { return c.run(ctx) }

// sleepCheck takes d unless ctx ends first.
func sleepCheck(target string, d time.Duration) funcCheck {
	return funcCheck{name: "sleep", target: target, run: func(ctx context.Context) error {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("sleep: %w", ctx.Err())
		}
	}}
}

func TestExecute(t *testing.T) {
	tests := []struct {
		name       string
		check      funcCheck
		timeout    time.Duration
		wantStatus string
		wantErr    []string
		wantIs     error
	}{
		{
			name:       "pass",
			check:      funcCheck{name: "ok", target: "t", run: func(context.Context) error { return nil }},
			timeout:    time.Second,
			wantStatus: "pass",
		},
		{
			name:       "fail keeps the error",
			check:      funcCheck{name: "bad", target: "t", run: func(context.Context) error { return errors.New("boom") }},
			timeout:    time.Second,
			wantStatus: "fail",
			wantErr:    []string{"boom"},
		},
		{
			name: "skip",
			check: funcCheck{name: "skip", target: "t", run: func(context.Context) error {
				return fmt.Errorf("no kubeconfig: %w", checks.ErrSkipped)
			}},
			timeout:    time.Second,
			wantStatus: "skip",
			wantIs:     checks.ErrSkipped,
		},
		{
			name:       "panic becomes a failure",
			check:      funcCheck{name: "panic", target: "t", run: func(context.Context) error { panic("kaboom") }},
			timeout:    time.Second,
			wantStatus: "fail",
			wantErr:    []string{"panic: kaboom"},
		},
		{
			name:       "timeout names the limit",
			check:      sleepCheck("t", time.Minute),
			timeout:    100 * time.Millisecond,
			wantStatus: "fail",
			wantErr:    []string{"sleep: context deadline exceeded", "(timed out after 100ms)"},
			wantIs:     context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := checks.Execute(t.Context(), tt.check, tt.timeout)

			assert.Equal(t, tt.check.name, res.Name)
			assert.Equal(t, tt.check.target, res.Target)
			assert.Equal(t, tt.wantStatus, res.Status())
			assert.Less(t, res.Duration, tt.timeout+time.Second)
			if tt.wantStatus == "pass" {
				assert.NoError(t, res.Err)
				return
			}
			require.Error(t, res.Err)
			for _, s := range tt.wantErr {
				assert.Contains(t, res.Err.Error(), s)
			}
			if tt.wantIs != nil {
				assert.ErrorIs(t, res.Err, tt.wantIs)
			}
		})
	}
}

func TestExecuteParentCancelIsAbort(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)

	res := checks.Execute(ctx, sleepCheck("t", time.Minute), 10*time.Second)

	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "(aborted: context canceled)")
	assert.NotContains(t, res.Err.Error(), "timed out")
	assert.ErrorIs(t, res.Err, context.Canceled)
	assert.Less(t, res.Duration, 5*time.Second)
}

// TestRunAllIsConcurrentAndOrdered: no check passes until every check has
// started, which only checks run at once can do; run one after another, the
// first would wait for the others until its timeout.
func TestRunAllIsConcurrentAndOrdered(t *testing.T) {
	var started sync.WaitGroup
	all := make(chan struct{})
	started.Add(3)
	go func() { started.Wait(); close(all) }()
	together := func(target string) checks.Check {
		return funcCheck{name: "together", target: target, run: func(ctx context.Context) error {
			started.Done()
			select {
			case <-all:
				return nil
			case <-ctx.Done():
				return fmt.Errorf("the other checks did not start: %w", ctx.Err())
			}
		}}
	}
	cs := []checks.Check{together("a"), together("b"), together("c")}

	results := checks.RunAll(t.Context(), cs, 5*time.Second)

	require.Len(t, results, len(cs))
	for i, r := range results {
		assert.Equal(t, cs[i].Target(), r.Target)
		assert.True(t, r.Passed(), "result %d: %v", i, r.Err)
	}
}

func TestRunAllSurvivesPanic(t *testing.T) {
	cs := []checks.Check{
		funcCheck{name: "ok", target: "a", run: func(context.Context) error { return nil }},
		funcCheck{name: "panic", target: "b", run: func(context.Context) error { panic("kaboom") }},
	}

	results := checks.RunAll(t.Context(), cs, time.Second)

	require.Len(t, results, 2)
	assert.True(t, results[0].Passed())
	assert.Equal(t, "fail", results[1].Status())
}

func BenchmarkRunAll(b *testing.B) {
	cs := make([]checks.Check, 5)
	for i := range cs {
		cs[i] = sleepCheck(fmt.Sprint(i), 200*time.Millisecond)
	}
	for b.Loop() {
		checks.RunAll(b.Context(), cs, 5*time.Second)
	}
}

// TestNames: every check reports the Name constant of its kind, the one the agent's
// CHECKS setting selects it by.
func TestNames(t *testing.T) {
	for want, c := range map[checks.Name]checks.Check{
		checks.NameDNS:        checks.NewDNS("example.com", nil),
		checks.NameTCP:        checks.NewTCP("127.0.0.1:1", nil),
		checks.NameHTTP:       checks.NewHTTP("http://127.0.0.1:1/", checks.StatusMatcher{}, nil),
		checks.NameAPIServer:  checks.NewAPIServer(nil, checks.APIServerReadyz, ""),
		checks.NameEndpoints:  checks.NewEndpoints(nil, "default", "kubernetes", false, nil),
		checks.NamePodNetwork: checks.NewPodNetwork(nil, "node-a", kubeDNS, 1, checks.PodProbe{}),
		checks.NameDaemonSets: checks.NewDaemonSets(nil, "node-a", checks.DaemonSetsWant{}),
		checks.NameConditions: checks.NewNodeCondition(nil, "node-a", checks.ConditionWant{Type: "Ready", Status: "True"}),
		checks.NameResources:  checks.NewResource(nil, "node-a", checks.ResourceMinimum{Name: "nvidia.com/gpu"}),
		checks.NameCSI:        checks.NewCSIDriver(nil, "node-a", "ebs.csi.aws.com", true),
		checks.NameDRA:        checks.NewDRADevices(nil, checks.NewDRAAPI(nil), "node-a", checks.DeviceMinimum{Driver: "gpu.nvidia.com", Min: 1}),
		checks.NameCommand:    checks.NewCommand("/bin/true", nil),
	} {
		assert.Equal(t, string(want), c.Name())
	}
}
