// Package metrics defines the controller's Prometheus metrics on
// controller-runtime's registry: the names users of the public controller
// already scrape (agent_sandbox_*) and ours (apply actions, requests saved by
// the diff, the watches its API clients open, counted by a transport
// wrapper: CountWatches). Label values that come from user input (namespaces, templates,
// launch types, owners, policies) are bounded in length and in number, the
// excess counted as "other". It only records and reads what it is told; it
// must never write to the cluster.
package metrics
