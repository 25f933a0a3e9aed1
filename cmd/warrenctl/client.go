package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// client calls the admin API. Every answer must come from Warren: the
// admin API names itself in its Server header, and an endpoint that does
// not (RabbitMQ's management plugin, another service on the port) is
// reported as what it is rather than misread.
type client struct {
	base, user, password string
	timeout              time.Duration
	checked              bool // the endpoint was seen to be Warren's
}

func (c *client) do(method, path string, body any) error {
	return c.request(method, path, body, nil, nil)
}

func (c *client) get(path string, out any) error {
	return c.request("GET", path, nil, out, nil)
}

func (c *client) request(method, path string, body, out any, header http.Header) error {
	data, err := c.send(method, path, body, header, 0)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// send makes one request and returns the answer's body; an answer of 300
// or more is an error with the API's reason. An answer that takes longer
// by design (a CPU profile) has extra added to the timeout.
func (c *client) send(method, path string, body any, header http.Header, extra time.Duration) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.user, c.password)
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	hc := &http.Client{Timeout: timeout + extra}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the admin API at %s: %v", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err := c.checkProduct(resp, data); err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		var e struct{ Error, Reason string }
		if json.Unmarshal(data, &e) == nil && e.Reason != "" {
			return nil, fmt.Errorf("%s (%s)", e.Reason, resp.Status)
		}
		return nil, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if err != nil {
		// A cut-off answer: a JSON one would fail to decode anyway, but
		// a profile's bytes would pass for whole.
		return nil, fmt.Errorf("%s %s: the answer was cut off: %v", method, path, err)
	}
	return data, nil
}

// checkProduct refuses an answer that is not Warren's, naming what
// answered when it can tell.
func (c *client) checkProduct(resp *http.Response, data []byte) error {
	if c.checked {
		return nil
	}
	server := resp.Header.Get("Server")
	if strings.HasPrefix(server, "Warren") {
		c.checked = true
		return nil
	}
	what := "something that is not Warren"
	var overview struct {
		Product string `json:"product_name"`
		Version string `json:"product_version"`
	}
	switch {
	case json.Unmarshal(data, &overview) == nil && overview.Product != "":
		what = overview.Product + " " + overview.Version
	case strings.EqualFold(server, "Cowboy"):
		what = "RabbitMQ's management plugin (or another Cowboy server)"
	case server != "":
		what = "a server calling itself " + server
	}
	return fmt.Errorf("%s answered at %s, not Warren's admin API: check --url or WARRENCTL_URL", what, c.base)
}
