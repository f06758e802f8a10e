// Package alerts tests the shipped PrometheusRule with the real promtool: `promtool check
// rules` on its groups and `promtool test rules` with testdata/nodeready_test.yaml. None of it
// needs a cluster.
package alerts
