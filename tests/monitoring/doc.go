// Package monitoring reads the Grafana dashboard and the PrometheusRule of
// config/monitoring and finds the metric names their PromQL expressions
// use, so that tests can check each against what the controller and the
// router really serve on /metrics (no panel or alert over a name that does
// not exist). Names are found with a small PromQL tokenizer (strings, label
// matchers, ranges and grouping clauses skipped; functions, keywords and
// numbers left out) rather than Prometheus' parser, which would pull the
// whole Prometheus server module into go.mod. It must never be imported by
// product code.
package monitoring
