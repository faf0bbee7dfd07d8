// Command ab compares builds on two figures of the hot path — a create →
// first output of a command, and the kill after it — with each build's
// server beside the others and their creates interleaved, so that the
// machine's drift (large on a shared VM) falls on every build alike. It
// prints each build's quartiles; scripts/bench-ab.sh starts the servers
// (with warm pools, or without: POOL=0).
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
	label          string
	client         *cove.Client
	creates, kills []time.Duration
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
			create, kill, err := firstOutput(ctx, b.client)
			if err != nil {
				log.Fatalf("%s: %v", b.label, err)
			}
			b.creates, b.kills = append(b.creates, create), append(b.kills, kill)
		}
	}
	for _, b := range builds {
		fmt.Printf("%s: create → first output %s; kill %s (%d sandboxes)\n", b.label, quartiles(b.creates), quartiles(b.kills), len(b.creates))
	}
}

// quartiles are xs' p25, p50 and p75 in milliseconds.
func quartiles(xs []time.Duration) string {
	slices.Sort(xs)
	q := func(f float64) float64 { return float64(xs[int(f*float64(len(xs)-1))]) / float64(time.Millisecond) }
	return fmt.Sprintf("p25 %.2f ms, p50 %.2f ms, p75 %.2f ms", q(0.25), q(0.5), q(0.75))
}

// firstOutput times a create and its first command's output, then the
// sandbox's kill.
func firstOutput(ctx context.Context, c *cove.Client) (create, kill time.Duration, err error) {
	start := time.Now()
	s, err := c.Create(ctx, cove.CreateOptions{Timeout: time.Minute})
	if err != nil {
		return 0, 0, err
	}
	res, err := s.Commands.Run(ctx, "echo hi")
	create = time.Since(start)
	if err == nil && res.Stdout != "hi\n" {
		err = fmt.Errorf("echo hi printed %q", res.Stdout)
	}
	start = time.Now()
	if kerr := s.Kill(context.WithoutCancel(ctx)); err == nil {
		err = kerr
	}
	return create, time.Since(start), err
}
