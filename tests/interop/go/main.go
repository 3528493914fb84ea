// h3client downloads one URL over HTTP/3 with quic-go's client (package
// github.com/quic-go/quic-go/http3), unmodified: the Go peer of artq's HTTP/3
// interop tests (crates/artq/tests/interop_h3.rs).
//
// Usage:
//
//	h3client [-insecure] [-timeout S] [-o FILE] https://HOST:PORT/path
//
// On a 200 response whose body is complete (as long as its content-length,
// when one is sent) it writes the body to FILE (or stdout), prints
// "received N bytes in T s: G Mbit/s" on stderr (the shape of `artq get`) and
// exits 0. Exit codes: 1 transfer, connection or HTTP error (any status other
// than 200), 2 bad usage, 3 timeout. A failed download removes the -o file.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

const (
	exitError   = 1
	exitUsage   = 2
	exitTimeout = 3
)

func main() {
	os.Exit(run())
}

func run() int {
	flags := flag.NewFlagSet("h3client", flag.ContinueOnError)
	insecure := flags.Bool("insecure", false, "do not verify the server certificate")
	timeout := flags.Float64("timeout", 60, "give up after this many seconds")
	output := flags.String("o", "", "write the body here (default stdout)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		return exitUsage
	}
	if flags.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: h3client [-insecure] [-timeout S] [-o FILE] https://HOST:PORT/path")
		return exitUsage
	}
	target := flags.Arg(0)
	if u, err := url.Parse(target); err != nil || u.Scheme != "https" || u.Host == "" {
		fmt.Fprintf(os.Stderr, "error: URL must be https://HOST:PORT/path, got %q\n", target)
		return exitUsage
	}
	if !(*timeout > 0) {
		fmt.Fprintln(os.Stderr, "error: -timeout must be positive")
		return exitUsage
	}

	sink := io.Writer(os.Stdout)
	var file *os.File
	if *output != "" {
		f, err := os.Create(*output)
		if err != nil {
			fmt.Fprintf(os.Stderr, "error: cannot open output: %v\n", err)
			return exitError
		}
		file = f
		sink = f
	}

	deadline := time.Duration(*timeout * float64(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	received, elapsed, err := download(ctx, target, *insecure, sink)
	if file != nil {
		if cerr := file.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("cannot write output: %w", cerr)
		}
	}
	if err != nil {
		if file != nil {
			os.Remove(*output)
		}
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "error: timed out after %g s: %v\n", *timeout, err)
			return exitTimeout
		}
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		return exitError
	}
	secs := elapsed.Seconds()
	mbps := 0.0
	if secs > 0 {
		mbps = float64(received) * 8 / secs / 1e6
	}
	fmt.Fprintf(os.Stderr, "received %d bytes in %.3f s: %.1f Mbit/s\n", received, secs, mbps)
	return 0
}

// download fetches target over HTTP/3 and copies a 200 response's body to
// sink; it returns the body size and the time from request to last byte.
func download(ctx context.Context, target string, insecure bool, sink io.Writer) (int64, time.Duration, error) {
	transport := &http3.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: insecure},
		QUICConfig:      &quic.Config{HandshakeIdleTimeout: 10 * time.Second},
	}
	defer transport.Close()
	client := &http.Client{Transport: transport}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 3 {
		return 0, 0, fmt.Errorf("response came over %s, not HTTP/3", resp.Proto)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("HTTP status %d for %s", resp.StatusCode, target)
	}
	received, err := io.Copy(sink, resp.Body)
	if err != nil {
		return received, 0, fmt.Errorf("after %d bytes: %w", received, err)
	}
	if resp.ContentLength >= 0 && received != resp.ContentLength {
		return received, 0, fmt.Errorf("body has %d bytes, content-length says %d", received, resp.ContentLength)
	}
	return received, time.Since(start), nil
}
