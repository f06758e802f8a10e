package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/uninstall"
	"github.com/nodeready/nodeready/internal/wiring"
)

// uninstallCommand is `nodeready uninstall`, which the chart's pre-delete hook and
// manifests/uninstall/ run: it takes nodeready off the cluster without stranding a held
// node (package uninstall). It reads the agent's configuration, for the startup taints
// and the verified label; a bad value stops it before any API call, as it stops the agent.
func uninstallCommand(ctx context.Context, args []string, stderr io.Writer, newClient newClientFunc) int {
	opts, err := uninstall.Flags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "nodeready uninstall: %v\n", err)
		return exitConfig
	}
	cfg, err := config.Load(true)
	if err != nil {
		printConfigError(stderr, err)
		return exitConfig
	}
	log := wiring.NewLogger(cfg, stderr)
	wiring.RouteClientGoLogs(log)
	clients, err := newClient(false, log)
	if err == nil && clients.Kube == nil {
		err = errors.New("no Kubernetes configuration: set KUBECONFIG, or run in a pod")
	}
	if err != nil {
		log.Error().Err(err).Msg("Could not create Kubernetes client")
		return exitFailed
	}
	if err := uninstall.New(clients.Kube, cfg, log).Run(ctx, opts); err != nil {
		log.Error().Err(err).Msg("Uninstall stopped")
		return exitFailed
	}
	log.Info().Msg("Uninstalled")
	return exitOK
}
