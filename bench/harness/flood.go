package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// floodFigures measures the requests per second the API serves (GET
// /v2/sandboxes with the key, 4 clients, for d) without a flood and while
// n idle connections without a credential are held from the loopback
// address from (each opened again a second after the server closes it):
// on keep-alive connections, and on a new connection per request.
func floodFigures(ctx context.Context, url, key, from string, n int, d time.Duration) {
	for _, mode := range []string{"keepalive", "new-connection"} {
		quiet, _ := apiRate(ctx, url, key, mode == "new-connection", d)
		stop := holdIdle(ctx, url, from, n)
		held := waitHeld(url, n)
		flooded, failed := apiRate(ctx, url, key, mode == "new-connection", d)
		stop()
		fmt.Printf("BenchmarkFlood/%s 4 0 ns/op %.1f quiet-req/s %.1f flood-req/s %d flood-held %d flood-errors %d flood-conns\n",
			mode, quiet, flooded, held, failed, n)
	}
}

// apiRate is how many authenticated requests per second 4 clients get
// answered over d, and how many failed.
func apiRate(ctx context.Context, url, key string, fresh bool, d time.Duration) (float64, int64) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableKeepAlives: fresh}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v2/sandboxes", nil)
				check(err)
				req.Header.Set("X-API-Key", key)
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds(), failed.Load()
}

// holdIdle keeps n silent connections from the address from to url's
// server until stop, each opened again a second after the server closes
// it; stop returns once they are closed.
func holdIdle(ctx context.Context, url, from string, n int) (stop func()) {
	addr := url[len("http://"):]
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
					unblock := context.AfterFunc(ctx, func() { c.Close() })
					_, _ = io.Copy(io.Discard, c)
					unblock()
					c.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// waitHeld waits (10 s at most) until the server holds n connections not
// yet authenticated besides the one that asks, or as many as it will, and
// returns how many.
func waitHeld(url string, n int) int {
	held, last := 0, -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && held < n; time.Sleep(time.Second) {
		var h struct {
			Conns struct {
				Held int `json:"held"`
			} `json:"unauthenticatedConnections"`
		}
		resp, err := http.Get(url + "/health")
		if err != nil {
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil {
			continue
		}
		if held = h.Conns.Held - 1; held == last && held > 0 { // this request's own aside
			break // as many as it holds
		}
		last = held
	}
	return held
}
