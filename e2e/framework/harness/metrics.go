package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/nodeready/nodeready/e2e/framework/promtext"
)

// Scrape returns the value of one series, such as nodeready_rounds_total or
// nodeready_node_patches_total{result="error"} (promtext.Sample.Key), from the /metrics of
// the agent at addr (kubelet.PodInfo.MetricsAddr): the agent's own account of its rounds and
// failures, read the way Prometheus would.
func Scrape(ctx context.Context, addr, metric string) (float64, error) {
	url := "http://" + addr + "/metrics"
	name, _, _ := strings.Cut(metric, "{")
	samples, err := promtext.Scrape(ctx, url, name)
	if err != nil {
		return 0, err
	}
	for _, s := range samples {
		if s.Key() == metric {
			return s.Value, nil
		}
	}
	return 0, fmt.Errorf("no metric %s at %s", metric, url)
}
