package rules

import (
	"encoding/json"
	"fmt"
	"os"
)

// DashboardQueries returns the PromQL queries of the Grafana dashboard at path
// (charts/nodeready/dashboards/nodeready.json), by panel title and query refId: "Held
// nodes/A". The queries keep Grafana's $__range for the caller to set.
func DashboardQueries(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	queries := map[string]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, q := range p.Targets {
			key := p.Title + "/" + q.RefID
			if _, dup := queries[key]; dup {
				return nil, fmt.Errorf("%s: two queries %s", path, key)
			}
			if q.Expr == "" {
				return nil, fmt.Errorf("%s: query %s is empty", path, key)
			}
			queries[key] = q.Expr
		}
	}
	if len(queries) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return queries, nil
}
