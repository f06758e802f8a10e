package promtext_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework/promtext"
)

const exposition = `# HELP nodeready_node_patches_total Node writes.
# TYPE nodeready_node_patches_total counter
nodeready_node_patches_total{result="error"} 3
nodeready_node_patches_total{result="ok"} 1
# TYPE nodeready_verified gauge
nodeready_verified 0
other_metric{b="2",a="with \"quotes\", a\\ and\na newline"} 1.5e+01
# TYPE request_seconds histogram
request_seconds_bucket{verb="GET",le="0.1"} 2
request_seconds_bucket{verb="GET",le="+Inf"} 3
request_seconds_sum{verb="GET"} 0.25
request_seconds_count{verb="GET"} 3
`

func TestParse(t *testing.T) {
	all, err := promtext.Parse(strings.NewReader(exposition))
	require.NoError(t, err)
	byKey := map[string]float64{}
	for _, s := range all {
		byKey[s.Key()] = s.Value
	}
	assert.Equal(t, map[string]float64{
		`nodeready_node_patches_total{result="error"}`:                3,
		`nodeready_node_patches_total{result="ok"}`:                   1,
		`nodeready_verified`:                                          0,
		`other_metric{a="with \"quotes\", a\\ and\na newline",b="2"}`: 15,
		`request_seconds_bucket{le="0.1",verb="GET"}`:                 2,
		`request_seconds_bucket{le="+Inf",verb="GET"}`:                3,
		`request_seconds_sum{verb="GET"}`:                             0.25,
		`request_seconds_count{verb="GET"}`:                           3,
	}, byKey, "keys are the series as written, labels sorted by name")

	some, err := promtext.Parse(strings.NewReader(exposition), "nodeready_verified", "request_seconds_count")
	require.NoError(t, err)
	require.Len(t, some, 2)
	assert.Equal(t, promtext.Sample{Name: "nodeready_verified", Labels: map[string]string{}, Value: 0}, some[0])
	assert.Equal(t, map[string]string{"verb": "GET"}, some[1].Labels)

	_, err = promtext.Parse(strings.NewReader("nodeready_verified not-a-number\n"))
	assert.Error(t, err)
}
