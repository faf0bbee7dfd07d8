// Command tti measures time to interactive through the Go SDK: create a
// sandbox, then run `node -v` in it (the metric independent sandbox
// benchmarks use). It prints one line in `go test -bench` format for
// benchreport. The server comes from COVE_API_URL / COVE_API_KEY.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

func main() {
	n := flag.Int("n", 50, "sandboxes to create, one after the other")
	flag.Parse()
	client, err := cove.NewClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	var samples []time.Duration
	for range *n {
		start := time.Now()
		sbx, err := client.Create(ctx, cove.CreateOptions{Timeout: time.Minute})
		if err != nil {
			fmt.Fprintln(os.Stderr, "create:", err)
			os.Exit(1)
		}
		if _, err := sbx.Commands.Run(ctx, "node -v"); err != nil {
			fmt.Fprintln(os.Stderr, "run:", err)
			os.Exit(1)
		}
		samples = append(samples, time.Since(start))
		if err := sbx.Kill(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "kill:", err)
			os.Exit(1)
		}
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[int(q*float64(len(samples)-1))]) / float64(time.Millisecond)
	}
	fmt.Printf("BenchmarkTTI/go-sdk %d 0 ns/op %.2f p50-ms %.2f p95-ms %.2f p99-ms\n", len(samples), at(0.5), at(0.95), at(0.99))
}
