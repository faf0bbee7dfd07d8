package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
)

// maxKeptMessage bounds the message of a failure a key keeps: its
// replays get the message cut there.
const maxKeptMessage = 1024

// idempotencyKey is the form E2B's SDKs give Idempotency-Key.
var idempotencyKey = regexp.MustCompile(`^[a-z0-9-]{1,255}$`)

// keyedCreate serves a v2 create that carries an Idempotency-Key (E2B's
// SDKs from 2.61), per team, kept a day (a failure's answer 10 minutes),
// shared by every API replica: the first request with a key creates; a
// repeat while it runs is a 409 idempotency_in_progress (to retry); one
// with another body a 409 idempotency_request_mismatch; one after it
// ended gets its answer again (a failure too, its message cut at 1 KiB,
// unless it may pass when tried again: then the key is free for the
// retry). A team keeps its newest 10 000 keys (store.Limits). The create goes on if the client leaves, so that
// its retry finds it. body is the request's, as it came.
func (a *API) keyedCreate(w http.ResponseWriter, r *http.Request, req service.CreateRequest, body []byte) {
	key := r.Header.Values("Idempotency-Key")
	if len(key) != 1 || !idempotencyKey.MatchString(key[0]) {
		writeError(w, errs.New(errs.InvalidArgument, "Idempotency-Key: want 1 to 255 lower-case letters, digits and hyphens"))
		return
	}
	sum, err := requestSum(body)
	if err != nil {
		writeError(w, err)
		return
	}
	held, claimed, err := a.svc.ClaimCreate(r.Context(), req.Team, key[0], sum)
	switch {
	case err != nil:
		writeError(w, err)
	case !claimed && held.Sum != sum:
		writeError(w, errs.Final(errs.New(errs.Conflict, "Idempotency-Key %q was used for another request", key[0]), errs.CodeIdempotencyReused))
	case !claimed && held.Status == 0:
		writeError(w, errs.Retryable(errs.New(errs.Conflict, "a create with Idempotency-Key %q is in progress", key[0]), 0, errs.CodeIdempotencyBusy))
	case !claimed:
		if held.Status >= 400 { // kept only when final
			w.Header().Set("Should-Retry", "false")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(held.Status)
		_, _ = w.Write(held.Body)
	default:
		a.runKeyed(w, r, req, key[0])
	}
}

// runKeyed runs a create whose key the request claimed.
func (a *API) runKeyed(w http.ResponseWriter, r *http.Request, req service.CreateRequest, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), service.IdempotencyLease)
	defer cancel()
	var answer []byte
	req.Keyed = &service.Keyed{Key: key, Answer: func(sb service.Sandbox) []byte {
		answer, _ = json.Marshal(toSandbox(sb))
		answer = append(answer, '\n') // as writeJSON writes it
		return answer
	}}
	if _, err := a.svc.Create(ctx, req); err != nil {
		// Whatever the create's own deadline did, the key is settled.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		body, h := toAPIError(err)
		if h.Retry != nil && !*h.Retry {
			if len(body.Message) > maxKeptMessage { // it may quote the request: the key keeps its start
				body.Message = strings.ToValidUTF8(body.Message[:maxKeptMessage], "") + "…"
			}
			b, _ := json.Marshal(body)
			b = append(b, '\n') // as writeError writes it
			if ferr := a.svc.FinishCreate(ctx, req.Team, key, body.Code, b); ferr != nil {
				a.log.Warn("record a keyed create's failure", "key", key, "err", ferr)
			}
		} else if rerr := a.svc.ReleaseCreate(ctx, req.Team, key); rerr != nil {
			a.log.Warn("release a keyed create's key", "key", key, "err", rerr)
		}
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(answer)
}

// requestSum is a create body's hash, over its JSON as data (key order
// and spacing aside): two requests are the same when their sums are.
func requestSum(body []byte) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil && err != io.EOF {
		return "", errs.New(errs.InvalidArgument, "malformed JSON body: %v", err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:]), nil
}
