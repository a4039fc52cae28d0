package upstream

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// healthTTL is how long a probe's result is reused.
const healthTTL = 5 * time.Second

// probeTimeout bounds one probe.
const probeTimeout = time.Second

// Reachable probes the upstream (GET {base_url}/models with its key) at
// most once per healthTTL and reports the result: nil when it answered
// below 500, else an error a client may see (no address).
func (c *Client) Reachable(ctx context.Context) error {
	c.healthMu.Lock()
	defer c.healthMu.Unlock()
	if !c.healthAt.IsZero() && time.Since(c.healthAt) < healthTTL {
		return c.healthErr
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c.healthErr = c.probe(ctx)
	c.healthAt = time.Now()
	return c.healthErr
}

func (c *Client) probe(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.String()+"/models", nil)
	if err != nil {
		return fmt.Errorf("unreachable")
	}
	if c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.hc.Do(req)
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("no answer within %v", probeTimeout)
	case err != nil:
		return fmt.Errorf("unreachable")
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}
