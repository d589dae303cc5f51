// driftlab-toxiproxy is Toxiproxy's server with its HTTP API on a unix socket instead
// of a TCP port: Toxiproxy has no authentication, and any local user can reach a
// loopback port, so the API listens where only the stack's user can go (a socket in a
// folder of mode 700). The proxies' own listeners stay on loopback TCP: the lab's
// clients connect through them.
//
//	driftlab-toxiproxy -socket PATH
//	driftlab-toxiproxy -version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

const toxiproxyModule = "github.com/Shopify/toxiproxy/v2"

func main() {
	socket := flag.String("socket", "", "path of the API's unix socket (its folder: mode 700)")
	version := flag.Bool("version", false, "print the version of the embedded Toxiproxy")
	flag.Parse()
	if *version {
		fmt.Printf("driftlab-toxiproxy: toxiproxy version %s\n", toxiproxyVersion())
		return
	}
	if *socket == "" {
		fmt.Fprintln(os.Stderr, "driftlab-toxiproxy: -socket PATH is required")
		os.Exit(2)
	}
	if err := run(*socket); err != nil {
		fmt.Fprintf(os.Stderr, "driftlab-toxiproxy: %v\n", err)
		os.Exit(1)
	}
}

// toxiproxyVersion is the version of the Toxiproxy module this program was built with
// (its own Version variable says "git" unless set by its Makefile's flags).
func toxiproxyVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == toxiproxyModule {
				return dep.Version
			}
		}
	}
	return toxiproxy.Version
}

func run(socket string) error {
	logger := zerolog.New(os.Stdout).With().Timestamp().Logger()
	metrics := toxiproxy.NewMetricsContainer(prometheus.NewRegistry())
	server := toxiproxy.NewServer(metrics, logger)

	listener, err := listen(socket)
	if err != nil {
		return err
	}
	logger.Info().Str("version", toxiproxyVersion()).Str("socket", socket).
		Msg("Starting Toxiproxy HTTP server on a unix socket")
	api := &http.Server{
		Handler:      server.Routes(),
		ReadTimeout:  15 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  60 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- api.Serve(listener) }()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-served:
		return err
	case <-signals:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Shutdown closes the listener, which removes the socket file.
	return api.Shutdown(ctx)
}

// listen binds the socket, after removing the file a killed server left (nothing
// answers on it); a live server's socket is left alone and named.
func listen(socket string) (net.Listener, error) {
	if _, err := os.Lstat(socket); err == nil {
		conn, err := net.DialTimeout("unix", socket, time.Second)
		if err == nil {
			conn.Close()
			return nil, fmt.Errorf("another server answers on %s; stop it first", socket)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("cannot tell whether %s is in use: %v", socket, err)
		}
		if err := os.Remove(socket); err != nil {
			return nil, fmt.Errorf("cannot remove the stale socket %s: %v", socket, err)
		}
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	// The folder keeps strangers out; the socket itself is the owner's alone as well.
	if err := os.Chmod(socket, 0o600); err != nil {
		listener.Close()
		return nil, err
	}
	return listener, nil
}
