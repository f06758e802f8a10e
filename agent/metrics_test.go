package agent

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
)

func TestMetricsFollowConventions(t *testing.T) {
	m := newMetrics(BuildInfo{Version: "v1", Revision: "abc"}, time.Now())
	m.recordRound([]checks.Result{{Name: "dns", Duration: time.Millisecond}, {Name: "tcp", Err: errors.New("refused")}})
	problems, err := testutil.GatherAndLint(m.registry)
	require.NoError(t, err)
	assert.Empty(t, problems)
}
