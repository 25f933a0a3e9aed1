package admin

import (
	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// access is the least an endpoint asks of a user's tags, with RabbitMQ's
// reasons for a refusal (all 401 not_authorised, as RabbitMQ 3.10.8
// answers; checked against it):
//
//	no management tag at all   "Not management user"
//	monitoring endpoints       "Not monitor user"
//	policy changes             "Not policymaker user"
//	administrator endpoints    "Not administrator user"
//
// Within what its tags allow, a user who is not an administrator sees the
// queues, exchanges, bindings and policies of the vhosts it has
// permissions in only (listings leave the others out; a path naming one is
// 401 "User not authorised to access virtual host"). Monitoring sees every
// vhost in /api/vhosts and every connection, channel and consumer; the
// other tags see only their own connections, channels and consumers. (So
// RabbitMQ 3.10.8 answers; checked against it.)
type access uint8

const (
	management access = iota
	monitoring
	policymaker
	administrator
)

// tag names as RabbitMQ spells them.
const (
	tagAdministrator = "administrator"
	tagMonitoring    = "monitoring"
	tagPolicymaker   = "policymaker"
	tagManagement    = "management"
)

type tagged interface{ HasTag(string) bool }

// refusal says why u may not use an endpoint needing a, "" when it may.
func (a access) refusal(u tagged) string {
	admin := u.HasTag(tagAdministrator)
	monitor := admin || u.HasTag(tagMonitoring)
	policy := admin || u.HasTag(tagPolicymaker)
	if !(monitor || policy || u.HasTag(tagManagement)) {
		return "Not management user"
	}
	switch a {
	case monitoring:
		if !monitor {
			return "Not monitor user"
		}
	case policymaker:
		if !policy {
			return "Not policymaker user"
		}
	case administrator:
		if !admin {
			return "Not administrator user"
		}
	}
	return ""
}

const notInVHost = "User not authorised to access virtual host"

func (c *call) isAdmin() bool { return c.u.HasTag(tagAdministrator) }

// seesAll reports whether the user reads every vhost, connection and
// channel.
func (c *call) seesAll() bool { return c.isAdmin() || c.u.HasTag(tagMonitoring) }

// mayUse reports whether the user may see and change what is in a vhost.
func (c *call) mayUse(vhostName string) bool {
	if c.isAdmin() {
		return true
	}
	_, ok := c.a.b.Users().Permission(vhostName, c.u.Name)
	return ok
}

// vhost returns the vhost the path names: errNotFound when there is none,
// a 401 when the user may not use it.
func (c *call) vhost() (*vhost.VHost, error) {
	name := c.path("vhost")
	v, ok := c.a.findVHost(name)
	if !ok {
		return nil, errNotFound
	}
	if !c.mayUse(name) {
		return nil, notAuthorised(notInVHost)
	}
	return v, nil
}

// vhosts returns the vhost the path names, or every vhost the user may
// see when the path names none.
func (c *call) vhosts() ([]*vhost.VHost, error) {
	if c.path("vhost") != "" {
		v, err := c.vhost()
		if err != nil {
			return nil, err
		}
		return []*vhost.VHost{v}, nil
	}
	var out []*vhost.VHost
	for _, n := range c.a.b.VHosts() {
		if !c.mayUse(n) {
			continue
		}
		if v, ok := c.a.b.VHost(n); ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// grant is the user's rights in a vhost. Every request that declares,
// deletes, binds, publishes to, reads or purges a resource asks it, with
// the same rules the AMQP channel asks (auth.Grant), tags aside: an
// administrator with no permission in a vhost may list its resources but
// not touch them, as in RabbitMQ.
func (c *call) grant(vhostName string) auth.Grant {
	g, _ := c.a.b.Users().Grant(vhostName, c.u.Name)
	return g
}

// refusalAnswer is how a refused request is answered. RabbitMQ's API runs
// each such request on an AMQP channel of the user's own, and its answers
// show it (checked against 3.10.8): a user with no permission in the
// vhost cannot open the channel and gets 401 "Access refused." for all of
// them; a refused declare, delete, bind, unbind or purge is that 401 too;
// a refused get carries the channel's 403 text in a 401; a refused publish
// is a 400 whose reason starts with the AMQP code.
type refusalAnswer uint8

const (
	refusedPlain refusalAnswer = iota
	refusedWithText
	refusedPublish
)

// allow is nil when check (a Grant's answer) is, else the refusal as how
// says to answer it.
func allow(g auth.Grant, check error, how refusalAnswer) error {
	if check == nil {
		return nil
	}
	if !g.Permitted() || how == refusedPlain {
		return notAuthorised("Access refused.")
	}
	text := protocol.ReplyText(protocol.AccessRefused) + " - " + check.Error()
	if how == refusedPublish {
		return badRequest("%d %s", protocol.AccessRefused, text)
	}
	return notAuthorised(text)
}

// seesConnection reports whether the user may see a connection (or its
// channels and consumers) opened by user in vhostName.
func (c *call) seesConnection(user, vhostName string) bool {
	return c.seesAll() || user == c.u.Name
}
