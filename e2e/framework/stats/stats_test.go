package stats_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/nodeready/nodeready/e2e/framework/stats"
)

func TestPercentile(t *testing.T) {
	s := func(secs ...float64) []time.Duration {
		var ds []time.Duration
		for _, x := range secs {
			ds = append(ds, time.Duration(x*float64(time.Second)))
		}
		return ds
	}
	tests := []struct {
		name string
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", s(3), 50, 3 * time.Second},
		{"p50 of an even count is the lower middle", s(4, 1, 3, 2), 50, 2 * time.Second},
		{"p50 of an odd count is the middle", s(5, 1, 4, 2, 3), 50, 3 * time.Second},
		{"max", s(5, 1, 9, 2), 100, 9 * time.Second},
		{"p90 of ten", s(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Second},
		{"tiny p is the minimum", s(7, 3, 5), 1, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, stats.Percentile(tt.ds, tt.p))
		})
	}
}

func TestPercentileLeavesInputAlone(t *testing.T) {
	ds := []time.Duration{3, 1, 2}
	stats.Percentile(ds, 50)
	assert.Equal(t, []time.Duration{3, 1, 2}, ds)
}
