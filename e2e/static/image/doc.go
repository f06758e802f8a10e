// Package image tests the Dockerfile and the image that e2e/cmd/image builds from it against
// each other, and the release image's reference. None of it needs a cluster.
package image
