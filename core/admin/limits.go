package admin

import (
	"net/http"

	"github.com/warrenmq/warren/core/broker"
)

// Warren's own endpoints, under /api/warren/, for what rabbitmqctl does
// over Erlang distribution rather than the management API: changing the
// resource alarms' limits at run time (not stored: broker.toml's values
// apply again at the next start). A change is answered once the alarm is
// raised or cleared as the new limit implies.
//
//	PUT /api/warren/vm-memory-high-watermark  {"fraction": 0.4} or {"absolute": BYTES}
//	PUT /api/warren/disk-free-limit           {"bytes": BYTES} or {"mem_relative": 1.5}

func (a *api) routeLimits(mux *router) {
	a.handle(mux, "PUT /api/warren/vm-memory-high-watermark", administrator, a.putMemoryWatermark)
	a.handle(mux, "PUT /api/warren/disk-free-limit", administrator, a.putDiskFreeLimit)
}

func (a *api) putMemoryWatermark(c *call) (any, error) {
	r := c.r
	var body struct {
		Fraction *float64 `json:"fraction"`
		Absolute *uint64  `json:"absolute"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	switch {
	case (body.Fraction == nil) == (body.Absolute == nil):
		return nil, badRequest("give one of fraction and absolute")
	case body.Absolute != nil:
		return nil, asBadRequest(a.b.SetMemoryWatermark(float64(*body.Absolute), true))
	}
	return nil, asBadRequest(a.b.SetMemoryWatermark(*body.Fraction, false))
}

func (a *api) putDiskFreeLimit(c *call) (any, error) {
	r := c.r
	var body struct {
		Bytes       *uint64  `json:"bytes"`
		MemRelative *float64 `json:"mem_relative"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	switch {
	case (body.Bytes == nil) == (body.MemRelative == nil):
		return nil, badRequest("give one of bytes and mem_relative")
	case body.Bytes != nil:
		a.b.SetDiskFreeLimit(*body.Bytes)
		return nil, nil
	}
	if *body.MemRelative < 0 {
		return nil, badRequest("mem_relative: %v must not be negative", *body.MemRelative)
	}
	a.b.SetDiskFreeLimit(uint64(*body.MemRelative * float64(broker.SystemMemory())))
	return nil, nil
}

func asBadRequest(err error) error {
	if err != nil {
		return badRequest("%v", err)
	}
	return nil
}

// serverHeader names Warren in every answer, so that warrenctl can tell it
// talks to Warren and not to RabbitMQ's management plugin on the same port.
func serverHeader(h http.Handler) http.Handler {
	name := "Warren/" + broker.Version
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", name)
		h.ServeHTTP(w, r)
	})
}
