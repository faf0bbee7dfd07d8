package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/addrpolicy"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/ids"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/network"
)

// Delivery's bounds: a receiver has deliveryTimeout to answer; a failed
// delivery is tried again after 1, 2, 4 … s (at most maxBackoff), at most
// maxAttempts times in all (about 40 minutes), then given up and logged.
const (
	deliveryTimeout = 10 * time.Second
	deliveryLease   = 2 * deliveryTimeout // a claim outlives its attempt
	maxBackoff      = 5 * time.Minute
	maxAttempts     = 12
	maxSending      = 16
	// maxTeamSending is how many of those slots one team's deliveries
	// take at once: a team whose receivers hang holds no more. Its other
	// claimed deliveries wait for one of its slots while their claim has
	// an attempt's time left and a margin to record it (queueFresh), then
	// for their lease to end.
	maxTeamSending = 4
	queueFresh     = deliveryLease - deliveryTimeout - 2*time.Second
	// MaxTeamWebhooks caps a team's webhooks.
	MaxTeamWebhooks = 32
)

// WebhookChange is a webhook as a team creates it, or what an update
// changes (nil: kept).
type WebhookChange struct {
	Name, URL, Secret *string
	Enabled           *bool
	Events            *[]string
}

// CreateWebhook records a team's webhook: its URL http or https, its
// events E2B's types (none: all), enabled unless it says not.
func (s *Service) CreateWebhook(ctx context.Context, team string, c WebhookChange) (store.Webhook, error) {
	w := store.Webhook{ID: ids.UUID(), Team: team, Enabled: true, Events: store.EventTypes, CreatedAt: time.Now().UTC()}
	if c.URL == nil {
		return store.Webhook{}, errs.New(errs.InvalidArgument, "a webhook needs a url")
	}
	if err := s.applyWebhook(&w, c); err != nil {
		return store.Webhook{}, err
	}
	if have, err := s.store.TeamWebhooks(ctx, team); err != nil {
		return store.Webhook{}, err
	} else if len(have) >= MaxTeamWebhooks {
		return store.Webhook{}, errs.New(errs.QuotaExceeded, "team quota: the team has %d webhooks, at most %d", len(have), MaxTeamWebhooks)
	}
	if err := s.store.AddWebhook(ctx, w); err != nil {
		return store.Webhook{}, err
	}
	return w, nil
}

// UpdateWebhook changes what c gives of a team's webhook.
func (s *Service) UpdateWebhook(ctx context.Context, team, id string, c WebhookChange) (store.Webhook, error) {
	w, err := s.store.Webhook(ctx, team, id)
	if err != nil {
		return store.Webhook{}, err
	}
	if err := s.applyWebhook(&w, c); err != nil {
		return store.Webhook{}, err
	}
	return w, s.store.UpdateWebhook(ctx, w)
}

// Webhook returns a team's webhook.
func (s *Service) Webhook(ctx context.Context, team, id string) (store.Webhook, error) {
	return s.store.Webhook(ctx, team, id)
}

// Webhooks are a team's webhooks.
func (s *Service) Webhooks(ctx context.Context, team string) ([]store.Webhook, error) {
	return s.store.TeamWebhooks(ctx, team)
}

// WebhookDeliveries are what a team's webhook has still to take: its
// failed attempts' deliveries, and those not tried yet.
func (s *Service) WebhookDeliveries(ctx context.Context, team, id string) ([]store.Delivery, error) {
	return s.store.WebhookDeliveries(ctx, team, id)
}

// DeleteWebhook removes a team's webhook; what was on its way is dropped.
func (s *Service) DeleteWebhook(ctx context.Context, team, id string) error {
	return s.store.DeleteWebhook(ctx, team, id)
}

func (s *Service) applyWebhook(w *store.Webhook, c WebhookChange) error {
	if c.Name != nil {
		if len(*c.Name) > 200 {
			return errs.New(errs.InvalidArgument, "a webhook's name has at most 200 bytes")
		}
		w.Name = *c.Name
	}
	if c.URL != nil {
		if err := s.checkWebhookURL(*c.URL); err != nil {
			return err
		}
		w.URL = *c.URL
	}
	if c.Secret != nil {
		if len(*c.Secret) > 1024 {
			return errs.New(errs.InvalidArgument, "signatureSecret has at most 1024 bytes")
		}
		w.Secret = s.storedWebhookSecret(w.ID, *c.Secret)
	}
	if c.Enabled != nil {
		w.Enabled = *c.Enabled
	}
	if c.Events != nil {
		events := slices.Clone(*c.Events)
		if len(events) == 0 {
			events = store.EventTypes
		}
		for _, e := range events {
			if !slices.Contains(store.EventTypes, e) {
				return errs.New(errs.InvalidArgument, "events: %q is not an event type (%v)", e, store.EventTypes)
			}
		}
		slices.Sort(events)
		w.Events = slices.Compact(events)
	}
	return nil
}

// checkWebhookURL refuses what a webhook may not be sent to: a URL not
// http(s), with credentials, or at an address the sender refuses (the
// sender checks each address it connects to again).
func (s *Service) checkWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || len(raw) > 2048 {
		return errs.New(errs.InvalidArgument, "webhook url %q: want an http or https URL without credentials", raw)
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := s.webhookAddrAllowed(a); err != nil {
			return err
		}
	}
	return nil
}

// webhookAddrAllowed checks an address a webhook is sent to with the
// address policy of requests made for tenants (addrpolicy): never a
// sandbox range (the default one, the nodes' own: Config.SandboxRanges),
// whatever the operator allows; loopback, link-local (cloud metadata),
// private, CGNAT and reserved addresses, the host's own and the nodes' —
// where the node, the API and the host's services listen — only in the
// operator's ranges (Config.WebhookAllow). The sender's sockets are marked
// besides (network.TenantMark): a node's firewall keeps them off its
// sandboxes.
func (s *Service) webhookAddrAllowed(a netip.Addr) error {
	if err := s.webhooks.policy.Check(a); err != nil {
		return errs.New(errs.InvalidArgument, "webhook %w", err)
	}
	return nil
}

// webhookPolicy is the address policy of cfg's webhooks.
func webhookPolicy(cfg Config) *addrpolicy.Policy {
	return addrpolicy.New(addrpolicy.Config{Allow: cfg.WebhookAllow, Flag: "--webhook-allow", Nodes: cfg.NodeAddrs,
		Never: func() []netip.Prefix {
			ranges := []netip.Prefix{network.DefaultRange}
			if cfg.SandboxRanges != nil {
				ranges = append(ranges, cfg.SandboxRanges()...)
			}
			return ranges
		}})
}

// Signature is a delivery's e2b-signature: the SHA-256 of the webhook's
// secret followed by the raw body, in unpadded standard base64.
func Signature(secret string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(secret))
	h.Write(body)
	return base64.RawStdEncoding.EncodeToString(h.Sum(nil))
}

// webhookSender delivers due deliveries; wake has it look at once.
type webhookSender struct {
	kick    chan struct{}
	client  *http.Client
	policy  *addrpolicy.Policy
	breaker breaker
}

func (w *webhookSender) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (s *Service) newWebhookSender() *webhookSender {
	pol := webhookPolicy(s.cfg)
	dialer := &net.Dialer{Timeout: deliveryTimeout, Control: pol.Control(network.MarkTenant)}
	return &webhookSender{kick: make(chan struct{}, 1), policy: pol, client: &http.Client{
		Timeout: deliveryTimeout,
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, TLSHandshakeTimeout: deliveryTimeout,
			MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// RunWebhooks delivers the team's events to their webhooks until ctx
// ends: each delivery at least once (it stays recorded until a receiver
// answers 2xx), tried again with backoff; a claimed delivery is hidden
// from other replicas for its lease, so one whose replica died is sent
// by another after it. Sandbox operations never wait for it.
func (s *Service) RunWebhooks(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	sem := make(chan struct{}, maxSending)
	var wg sync.WaitGroup
	defer wg.Wait()
	teams := &teamSlots{sending: map[string]int{}, queued: map[string][]queuedDelivery{}}
	for {
		due, err := s.store.ClaimDeliveries(ctx, time.Now(), deliveryLease, maxSending)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("claim webhook deliveries", logx.Err(err))
		}
		for _, d := range due {
			if !teams.take(d, time.Now()) {
				continue // queued for one of its team's slots
			}
			if !s.webhooks.breaker.allow(d.WebhookID, time.Now()) {
				// Claimed: due again once its lease ends. The slot goes
				// to the team's next queued delivery, if any.
				var ok bool
				if d, ok = teams.next(d.Team, time.Now(), &s.webhooks.breaker); !ok {
					continue
				}
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() {
					<-sem
					wg.Done()
				}()
				// The team's slot goes to its next queued delivery, if any.
				// Once ctx ends, what is left waits for its lease (another
				// replica's, or this one's next start): no attempt is spent.
				for ok := true; ok && ctx.Err() == nil; d, ok = teams.next(d.Team, time.Now(), &s.webhooks.breaker) {
					s.deliver(ctx, d)
				}
			}()
		}
		if len(due) == maxSending {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.webhooks.kick:
		}
	}
}

// teamSlots are the deliveries each team is sending (at most
// maxTeamSending) and those it claimed that wait for one of its slots.
type teamSlots struct {
	mu      sync.Mutex
	sending map[string]int
	queued  map[string][]queuedDelivery
}

type queuedDelivery struct {
	d       store.Delivery
	claimed time.Time
}

// take gives d a slot of its team (true), or queues it (false).
func (t *teamSlots) take(d store.Delivery, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sending[d.Team] < maxTeamSending {
		t.sending[d.Team]++
		return true
	}
	t.queued[d.Team] = append(t.fresh(d.Team, now), queuedDelivery{d, now})
	return false
}

// next is the team's next queued delivery, for the slot of one that was
// just sent; without one (or with only deliveries whose claim has not an
// attempt's time left, or whose webhook's breaker is open: their leases
// bring them back), the slot is given back.
func (t *teamSlots) next(team string, now time.Time, b *breaker) (store.Delivery, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.fresh(team, now)
	for len(q) > 0 {
		d := q[0].d
		q = q[1:]
		if b.allow(d.WebhookID, now) {
			t.setQueue(team, q)
			return d, true
		}
	}
	t.setQueue(team, nil)
	if t.sending[team]--; t.sending[team] == 0 {
		delete(t.sending, team)
	}
	return store.Delivery{}, false
}

// fresh is the team's queue without the claims too old to be sent
// before their lease ends (t.mu held).
func (t *teamSlots) fresh(team string, now time.Time) []queuedDelivery {
	q := t.queued[team]
	for len(q) > 0 && now.Sub(q[0].claimed) >= queueFresh {
		q = q[1:]
	}
	return q
}

func (t *teamSlots) setQueue(team string, q []queuedDelivery) {
	if len(q) == 0 {
		delete(t.queued, team)
		return
	}
	t.queued[team] = q
}

// deliver sends one delivery and records the outcome.
func (s *Service) deliver(ctx context.Context, d store.Delivery) {
	err := s.post(ctx, d)
	s.webhooks.breaker.done(d.WebhookID, err == nil, time.Now())
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case err == nil:
		err = s.store.FinishDelivery(done, d.ID)
	case d.Attempt+1 >= maxAttempts:
		s.log.Warn("webhook delivery given up", "webhook", d.WebhookID, "event", d.EventID, "attempts", d.Attempt+1, logx.Err(err))
		err = s.store.FinishDelivery(done, d.ID)
	default:
		s.log.Debug("webhook delivery failed", "webhook", d.WebhookID, "event", d.EventID, "attempt", d.Attempt+1, logx.Err(err))
		err = s.store.RetryDelivery(done, d.ID, time.Now().Add(min(time.Second<<d.Attempt, maxBackoff)), err.Error())
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn("record a webhook delivery", "delivery", d.ID, logx.Err(err))
	}
}

func (s *Service) post(ctx context.Context, d store.Delivery) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cove-webhooks")
	req.Header.Set("e2b-webhook-id", d.WebhookID)
	req.Header.Set("e2b-delivery-id", d.ID)
	req.Header.Set("e2b-signature-version", "v1")
	secret, err := s.webhookSecret(d.WebhookID, d.Secret)
	if err != nil {
		s.log.Warn("webhook delivery not signed, so not sent", "webhook", d.WebhookID, logx.Err(err))
		return err
	}
	if secret != "" {
		req.Header.Set("e2b-signature", Signature(secret, d.Body))
	}
	// What the team reads of a failure (the delivery's lastError) is the
	// status code or a fixed reason, never the receiver's words: its
	// status text, body, headers or certificate.
	resp, err := s.webhooks.client.Do(req)
	if err != nil {
		s.log.Debug("webhook post", "webhook", d.WebhookID, logx.Err(err))
		return errors.New(addrpolicy.Reason(err))
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the receiver answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return nil
}
