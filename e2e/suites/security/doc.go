// Package security proves on a real API server that an agent can change only
// its own node, and only the verified label and the startup taint on it: the own-node
// admission policy, the RBAC of the default install, the managed fields and the Events an
// agent may write.
package security
