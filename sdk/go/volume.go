package cove

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// Volume is a named, size-capped file system sandboxes mount read-write
// (CreateOptions.Volumes), kept after they end. Token guards its content
// (ReadFile, WriteFile).
type Volume struct {
	ID    string `json:"volumeID"`
	Name  string `json:"name"`
	Token string `json:"token,omitempty"`

	client *Client
}

// CreateVolume makes a volume called name.
func (c *Client) CreateVolume(ctx context.Context, name string) (*Volume, error) {
	v := &Volume{client: c}
	if _, err := c.do(ctx, http.MethodPost, "/volumes", map[string]any{"name": name}, v); err != nil {
		return nil, err
	}
	return v, nil
}

// GetVolume finds a volume by id or name.
func (c *Client) GetVolume(ctx context.Context, ref string) (*Volume, error) {
	v := &Volume{client: c}
	if _, err := c.do(ctx, http.MethodGet, "/volumes/"+url.PathEscape(ref), nil, v); err != nil {
		return nil, err
	}
	return v, nil
}

// ListVolumes returns the team's volumes (without their tokens).
func (c *Client) ListVolumes(ctx context.Context) ([]Volume, error) {
	var out []Volume
	_, err := c.do(ctx, http.MethodGet, "/volumes", nil, &out)
	return out, err
}

// DeleteVolume deletes a volume (by id or name) and its files; sandboxes
// that mount it keep it until they end. An unknown one is ErrNotFound.
func (c *Client) DeleteVolume(ctx context.Context, ref string) error {
	_, err := c.do(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(ref), nil, nil)
	return err
}

// content calls the volume's content API with its token.
func (v *Volume) content(ctx context.Context, method, op, path string, q url.Values, body io.Reader) (*http.Response, error) {
	if q == nil {
		q = url.Values{}
	}
	q.Set("path", path)
	req, err := http.NewRequestWithContext(ctx, method, v.client.apiURL+"/volumecontent/"+url.PathEscape(v.ID)+"/"+op+"?"+q.Encode(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+v.Token)
	resp, err := v.client.http.Do(req)
	if err != nil {
		return nil, transportErr(err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, apiError(resp)
	}
	return resp, nil
}

// WriteFile writes r to path in the volume (its directory must exist),
// replacing a file there when overwrite.
func (v *Volume) WriteFile(ctx context.Context, path string, r io.Reader, overwrite bool) error {
	q := url.Values{}
	if overwrite {
		q.Set("force", "true")
	}
	resp, err := v.content(ctx, http.MethodPut, "file", path, q, r)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// ReadFile opens the file at path in the volume; close it when done.
func (v *Volume) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := v.content(ctx, http.MethodGet, "file", path, nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
