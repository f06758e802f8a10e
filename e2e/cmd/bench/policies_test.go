package main

import (
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPolicyCost reads what admission cost between two scrapes from the series the API server
// writes: the ValidatingAdmissionPolicy plugin's time per operation, and each policy's
// matchConditions, and nothing of other plugins or of webhooks.
func TestPolicyCost(t *testing.T) {
	before, err := parseMetrics([]byte(`process_cpu_seconds_total 10
apiserver_admission_controller_admission_duration_seconds_sum{name="ValidatingAdmissionPolicy",operation="UPDATE",rejected="false",type="validate"} 1
apiserver_admission_controller_admission_duration_seconds_count{name="ValidatingAdmissionPolicy",operation="UPDATE",rejected="false",type="validate"} 100
apiserver_admission_controller_admission_duration_seconds_sum{name="NodeRestriction",operation="UPDATE",rejected="false",type="admit"} 5
apiserver_admission_controller_admission_duration_seconds_count{name="NodeRestriction",operation="UPDATE",rejected="false",type="admit"} 100
apiserver_admission_match_condition_evaluation_seconds_sum{kind="policy",name="nodeready-own-node",operation="UPDATE",type="validate"} 0.5
apiserver_admission_match_condition_evaluation_seconds_count{kind="policy",name="nodeready-own-node",operation="UPDATE",type="validate"} 100
apiserver_admission_match_condition_evaluation_seconds_sum{kind="webhook",name="other",operation="UPDATE",type="validate"} 9
apiserver_admission_match_condition_evaluation_seconds_count{kind="webhook",name="other",operation="UPDATE",type="validate"} 9
`), scrapedMetrics...)
	require.NoError(t, err)
	after, err := parseMetrics([]byte(`process_cpu_seconds_total 16
apiserver_admission_controller_admission_duration_seconds_sum{name="ValidatingAdmissionPolicy",operation="UPDATE",rejected="false",type="validate"} 1.3
apiserver_admission_controller_admission_duration_seconds_count{name="ValidatingAdmissionPolicy",operation="UPDATE",rejected="false",type="validate"} 200
apiserver_admission_controller_admission_duration_seconds_sum{name="ValidatingAdmissionPolicy",operation="CREATE",rejected="false",type="validate"} 0.1
apiserver_admission_controller_admission_duration_seconds_count{name="ValidatingAdmissionPolicy",operation="CREATE",rejected="false",type="validate"} 50
apiserver_admission_controller_admission_duration_seconds_sum{name="NodeRestriction",operation="UPDATE",rejected="false",type="admit"} 50
apiserver_admission_controller_admission_duration_seconds_count{name="NodeRestriction",operation="UPDATE",rejected="false",type="admit"} 200
apiserver_admission_match_condition_evaluation_seconds_sum{kind="policy",name="nodeready-own-node",operation="UPDATE",type="validate"} 0.6
apiserver_admission_match_condition_evaluation_seconds_count{kind="policy",name="nodeready-own-node",operation="UPDATE",type="validate"} 200
apiserver_admission_match_condition_evaluation_seconds_sum{kind="webhook",name="other",operation="UPDATE",type="validate"} 90
apiserver_admission_match_condition_evaluation_seconds_count{kind="webhook",name="other",operation="UPDATE",type="validate"} 90
`), scrapedMetrics...)
	require.NoError(t, err)

	c := newPolicyCost(before, after, 3*time.Second)
	assert.InDelta(t, 6, c.cpu, 1e-9)
	assert.InDelta(t, 0.003, c.vap["UPDATE"], 1e-9, "0.3 s over 100 requests")
	assert.InDelta(t, 100, c.vapCount["UPDATE"], 1e-9)
	assert.InDelta(t, 0.002, c.vap["CREATE"], 1e-9)
	assert.Equal(t, map[string]float64{"nodeready-own-node": 0.001}, roundMap(c.match))
	assert.Equal(t, map[string]float64{"nodeready-own-node": 100}, c.matchCount)
}

func roundMap(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = float64(int64(v*1e9+0.5)) / 1e9
	}
	return out
}

// TestAttribute: a sample is the first part's whose function is on its stack, so a PATCH's
// admission by the policies counts as the policies', and a stack of no part as other.
func TestAttribute(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	patch, vap, gc, misc := fn(1, "k8s.io/apiserver/pkg/endpoints/handlers.PatchResource.func1"),
		fn(2, "k8s.io/apiserver/pkg/admission/plugin/policy/validating.(*Plugin).Validate"), fn(3, "runtime.gcBgMarkWorker"), fn(4, "main.other")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	lp, lv, lg, lm := loc(1, patch), loc(2, vap), loc(3, gc), loc(4, misc)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Function:   []*profile.Function{patch, vap, gc, misc},
		Location:   []*profile.Location{lp, lv, lg, lm},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lv, lp}, Value: []int64{1, 30e6}},
			{Location: []*profile.Location{lm, lp}, Value: []int64{1, 10e6}},
			{Location: []*profile.Location{lg}, Value: []int64{1, 5e6}},
			{Location: []*profile.Location{lm}, Value: []int64{1, 5e6}},
		},
	}
	parts, total := attribute(p)
	assert.Equal(t, 50*time.Millisecond, total)
	assert.Equal(t, 30*time.Millisecond, parts["admission: nodeready's ValidatingAdmissionPolicies"])
	assert.Equal(t, 10*time.Millisecond, parts["PATCH nodes, nodes/status: the agents' releases and conditions"])
	assert.Equal(t, 5*time.Millisecond, parts["garbage collection"])
	assert.Equal(t, 5*time.Millisecond, parts[partOf(&profile.Sample{})])
}
