// Command ab compares builds on one figure of the hot path — a pooled
// create → first output of a command — with each build's server beside
// the others and their creates interleaved, so that the machine's drift
// (large on a shared VM) falls on every build alike. It prints each
// build's quartiles; scripts/bench-ab.sh starts the servers.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

type build struct {
	label  string
	client *cove.Client
	xs     []time.Duration
}

func main() {
	urls := flag.String("urls", "", "the servers to compare: label=API URL, comma-separated")
	key := flag.String("key", "", "their API key")
	n := flag.Int("n", 150, "creates per server")
	pace := flag.Duration("pace", 300*time.Millisecond, "pause before each create: time for the pools to refill")
	flag.Parse()
	var builds []*build
	for _, lu := range strings.Split(*urls, ",") {
		label, url, ok := strings.Cut(lu, "=")
		if !ok {
			log.Fatalf("-urls: %q is not label=URL", lu)
		}
		c, err := cove.NewClient(cove.WithAPIURL(url), cove.WithSandboxURL(url), cove.WithAPIKey(*key))
		if err != nil {
			log.Fatal(err)
		}
		builds = append(builds, &build{label: label, client: c})
	}
	ctx := context.Background()
	for i := range *n {
		for j := range builds {
			b := builds[(i+j)%len(builds)] // each build goes first as often
			time.Sleep(*pace)
			d, err := firstOutput(ctx, b.client)
			if err != nil {
				log.Fatalf("%s: %v", b.label, err)
			}
			b.xs = append(b.xs, d)
		}
	}
	for _, b := range builds {
		slices.Sort(b.xs)
		q := func(f float64) float64 { return float64(b.xs[int(f*float64(len(b.xs)-1))]) / float64(time.Millisecond) }
		fmt.Printf("%s: pooled create → first output p25 %.2f ms, p50 %.2f ms, p75 %.2f ms (%d creates)\n", b.label, q(0.25), q(0.5), q(0.75), len(b.xs))
	}
}

// firstOutput times a create and its first command's output, then kills
// the sandbox.
func firstOutput(ctx context.Context, c *cove.Client) (time.Duration, error) {
	start := time.Now()
	s, err := c.Create(ctx, cove.CreateOptions{Timeout: time.Minute})
	if err != nil {
		return 0, err
	}
	defer s.Kill(context.WithoutCancel(ctx))
	res, err := s.Commands.Run(ctx, "echo hi")
	if err != nil {
		return 0, err
	}
	if res.Stdout != "hi\n" {
		return 0, fmt.Errorf("echo hi printed %q", res.Stdout)
	}
	return time.Since(start), nil
}
