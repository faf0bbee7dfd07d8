package main

import (
	"context"
	"fmt"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

// keyedCreates times pooled creates with and without an Idempotency-Key,
// interleaved so that both see the same machine: the key's cost is a
// claim and, with the sandbox's record, its answer in the store.
func keyedCreates(ctx context.Context, c *cove.Client, n int) {
	var plain, keyed []time.Duration
	for i := range 2 * n {
		time.Sleep(pace)
		opts := cove.CreateOptions{Timeout: 10 * time.Minute}
		if i%2 == 1 {
			opts.IdempotencyKey = fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)
		}
		t := time.Now()
		s, err := c.Create(ctx, opts)
		took := time.Since(t)
		check(err)
		live.Store(s, struct{}{})
		if opts.IdempotencyKey != "" {
			keyed = append(keyed, took)
		} else {
			plain = append(plain, took)
		}
		check(kill(ctx, s))
	}
	report("Create/pooled", plain, "")
	report("Create/pooled-keyed", keyed, "")
}
