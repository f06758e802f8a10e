// Package image builds container images without a Docker engine: one layer of files and a
// config, as go-containerregistry's v1.Image, ready to push to a registry or write to a file.
// Agent gives the runtime layout that the repository's Dockerfile produces (a static binary on
// a distroless static nonroot base), so the real node of the e2e tests runs what users run.
package image
