package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/template"
)

// FilesLinkTTL is how long an upload link of a COPY step's files stays
// valid (checked when the upload starts).
const FilesLinkTTL = 10 * time.Minute

// FilesUpload is what an upload link carries: the team it is bound to,
// when it expires, and the signature over both and the template and hash.
type FilesUpload struct {
	Team    string
	Expires time.Time
	Token   string
}

// filesToken signs the upload of a COPY step's files by team until exp.
func (t *Templates) filesToken(team, templateID, hash string, exp int64) string {
	m := hmac.New(sha256.New, t.secret)
	m.Write([]byte(strings.Join([]string{"template-files", team, templateID, hash, strconv.FormatInt(exp, 10)}, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// Files reports whether team uploaded the files of a COPY step (their
// hash, as its client names them) and they are kept; when not, it returns
// the signed upload the link carries. Another team's upload of the same
// hash is not this team's: it answers false.
func (t *Templates) Files(ctx context.Context, team, templateID, hash string) (bool, FilesUpload, error) {
	if _, err := t.owned(team, templateID); err != nil {
		return false, FilesUpload{}, err
	}
	digest, err := t.store.FilesDigest(ctx, team, hash)
	if err != nil || digest != "" {
		return digest != "", FilesUpload{}, err
	}
	exp := time.Now().Add(FilesLinkTTL).Truncate(time.Second)
	return false, FilesUpload{Team: team, Expires: exp, Token: t.filesToken(team, templateID, hash, exp.Unix())}, nil
}

// PutFiles stores an upload whose link is valid: signed for this template,
// hash and team, and not expired. The archive is kept under the SHA-256
// of its bytes and bound to the link's team; it replaces nothing.
func (t *Templates) PutFiles(ctx context.Context, templateID, hash string, up FilesUpload, body io.Reader) error {
	if !hmac.Equal([]byte(up.Token), []byte(t.filesToken(up.Team, templateID, hash, up.Expires.Unix()))) {
		return errs.New(errs.Unauthenticated, "invalid or missing upload token")
	}
	if time.Now().After(up.Expires) {
		return errs.New(errs.Unauthenticated, "the upload link expired at %s: ask for a new one", up.Expires.UTC().Format(time.RFC3339))
	}
	limit := int64(template.MaxFilesBytes)
	left, err := t.storageLeft(ctx, up.Team) // an upload is counted in the team's storage
	if err != nil {
		return err
	}
	if left > 0 {
		limit = min(limit, left)
	}
	if _, err = t.store.PutFiles(ctx, up.Team, hash, body, limit); errs.Is(err, errs.InvalidArgument) && limit < template.MaxFilesBytes { // the hash was checked when the link was made
		return errs.New(errs.QuotaExceeded, "team quota: the upload is larger than the %d MiB the team's storage quota leaves", limit>>20)
	}
	return err
}

// filesDigests returns steps with each COPY step's client hash replaced by
// the digest of the archive team uploaded for it: the builder copies from,
// and caches by, content the server hashed itself.
func (t *Templates) filesDigests(ctx context.Context, team string, steps []template.Step) ([]template.Step, error) {
	steps = slices.Clone(steps)
	for i, s := range steps {
		if s.FilesHash == "" {
			continue
		}
		digest, err := t.store.FilesDigest(ctx, team, s.FilesHash)
		if err != nil {
			return nil, err
		}
		if digest == "" {
			return nil, errs.New(errs.InvalidArgument, "the files of step %d (%s %s, hash %s) were not uploaded",
				i+1, s.Type, strings.Join(s.Args, " "), s.FilesHash)
		}
		steps[i].FilesHash = digest
	}
	return steps, nil
}
