package broker

import (
	"context"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/names"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// The operations below change users, permissions, vhosts and policies on
// behalf of the admin API and definitions imports. They are the only way
// those change while the broker runs: each checks what needs no state,
// then goes through change (replicated.go), which applies it here or, in
// a cluster, on every node; the apply* functions carry it out.

// PutUser adds or replaces a user with a password (hashed here) and tags.
// A nil password keeps an existing user's password (changing tags only); a
// new user without one cannot log in with a password.
func (b *Broker) PutUser(name string, password *string, tags []string) error {
	if err := b.checkUserName(name); err != nil {
		return err
	}
	hash, alg := "", auth.SHA256
	switch {
	case password != nil && *password != "":
		hash = auth.HashPassword(*password)
	case password == nil:
		if old, ok := b.users.User(name); ok {
			hash, alg = old.PasswordHash, old.Hashing // an imported user keeps the algorithm of their hash
		}
	}
	return b.putUser(&auth.User{Name: name, PasswordHash: hash, Hashing: alg, Tags: tags})
}

// checkUserName refuses an empty name, and a new user's name that
// names.Check refuses; a user there already keeps the name it has.
func (b *Broker) checkUserName(name string) error {
	if name == "" {
		return reply.PreconditionFailed("user name must not be empty")
	}
	if _, ok := b.users.User(name); ok {
		return nil
	}
	if err := names.Check("user", name); err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	return nil
}

// putUser installs a user as given, hash and all.
// putUser proposes u; one that says nothing of limits keeps those the
// user has (RabbitMQ's PUT of a user keeps them too).
func (b *Broker) putUser(u *auth.User) error {
	if u.Limits == nil {
		if old, ok := b.users.User(u.Name); ok {
			u.Limits = old.Limits
		}
	}
	return b.change(putUser{User: userRecordOf(u)})
}

// SetUserLimits replaces a user's limits (auth.UserMaxConnections,
// auth.UserMaxChannels; none clears them).
func (b *Broker) SetUserLimits(name string, limits map[string]int64) error {
	if err := auth.CheckUserLimits(limits); err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	old, ok := b.users.User(name)
	if !ok {
		return reply.NotFound("no user '%s'", name)
	}
	u := *old
	u.Limits = maps.Clone(limits)
	if u.Limits == nil {
		u.Limits = map[string]int64{} // said: none (nil would keep the old ones)
	}
	return b.change(putUser{User: userRecordOf(&u)})
}

func (b *Broker) applyPutUser(u *auth.User) error {
	if err := b.store.PutMeta(storage.KindUser, "", u.Name, userRecordOf(u).Table()); err != nil {
		return reply.Internal("could not store user '%s': %v", u.Name, err)
	}
	b.users.PutUser(u)
	return nil
}

// PutUserHash adds or replaces a user with a password hash as RabbitMQ
// writes it under alg (base64 of a 4-byte salt and the digest of salt and
// password): a user moved from RabbitMQ keeps its password. "" allows no
// password login.
func (b *Broker) PutUserHash(name, hash string, alg auth.Hashing, tags []string) error {
	if err := b.checkUserName(name); err != nil {
		return err
	}
	if err := alg.Valid(hash); err != nil {
		return reply.PreconditionFailed("password_hash is not a %s hash: %v", alg.Name(), err)
	}
	return b.putUser(&auth.User{Name: name, PasswordHash: hash, Hashing: alg, Tags: tags})
}

// DeleteUser removes a user and all their permissions.
func (b *Broker) DeleteUser(name string) error {
	return b.change(deleteUser{Name: name})
}

func (b *Broker) applyDeleteUser(name string) error {
	if _, ok := b.users.User(name); !ok {
		return reply.NotFound("no user '%s'", name)
	}
	for _, p := range b.users.Permissions() {
		if p.User == name {
			if err := b.store.DeleteMeta(storage.KindPermission, p.VHost, name); err != nil {
				return reply.Internal("could not delete permission: %v", err)
			}
		}
	}
	for _, p := range b.users.TopicPermissions() {
		if p.User == name {
			if err := b.store.DeleteMeta(storage.KindTopicPermission, p.VHost, name); err != nil {
				return reply.Internal("could not delete topic permissions: %v", err)
			}
		}
	}
	if err := b.store.DeleteMeta(storage.KindUser, "", name); err != nil {
		return reply.Internal("could not delete user '%s': %v", name, err)
	}
	b.users.DeleteUser(name)
	return nil
}

// SetPermission grants a user rights in a vhost.
func (b *Broker) SetPermission(vhost, user, configure, write, read string) error {
	if _, err := auth.NewPermission(configure, write, read); err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	return b.change(setPermission{Permission: permissionRecord{VHost: vhost, User: user, Configure: configure, Write: write, Read: read}})
}

func (b *Broker) applySetPermission(vhost, user, configure, write, read string) error {
	if _, ok := b.VHost(vhost); !ok {
		return reply.NotFound("no vhost '%s'", vhost)
	}
	if _, ok := b.users.User(user); !ok {
		return reply.NotFound("no user '%s'", user)
	}
	p, err := auth.NewPermission(configure, write, read)
	if err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	if err := b.store.PutMeta(storage.KindPermission, vhost, user, permissionRecord{Configure: p.Configure, Write: p.Write, Read: p.Read}.Table()); err != nil {
		return reply.Internal("could not store permission: %v", err)
	}
	b.users.SetPermission(vhost, user, p)
	return nil
}

// ClearPermission revokes a user's rights in a vhost.
func (b *Broker) ClearPermission(vhost, user string) error {
	return b.change(clearPermission{VHost: vhost, User: user})
}

func (b *Broker) applyClearPermission(vhost, user string) error {
	if _, ok := b.users.Permission(vhost, user); !ok {
		return reply.NotFound("user '%s' has no permissions in vhost '%s'", user, vhost)
	}
	if err := b.store.DeleteMeta(storage.KindPermission, vhost, user); err != nil {
		return reply.Internal("could not delete permission: %v", err)
	}
	b.users.ClearPermission(vhost, user)
	return nil
}

// SetVHostLimits replaces a vhost's limits (vhost.Limits; none clears
// them).
func (b *Broker) SetVHostLimits(name string, l topology.Limits) error {
	if err := topology.CheckLimits(l); err != nil {
		return err
	}
	if _, ok := b.VHost(name); !ok {
		return reply.NotFound("no vhost '%s'", name)
	}
	return b.change(setVHostLimits{VHost: name, Limits: l})
}

func (b *Broker) applySetVHostLimits(name string, l topology.Limits) error {
	v, ok := b.VHost(name)
	if !ok {
		return reply.NotFound("no vhost '%s'", name)
	}
	rec := vhostRecordOf(v)
	rec.Limits = l
	if err := b.store.PutMeta(storage.KindVHost, "", name, rec.Table()); err != nil {
		return reply.Internal("could not store the limits of vhost '%s': %v", name, err)
	}
	v.SetLimits(l)
	return nil
}

// SetVHostMetadata replaces a vhost's description and tags.
func (b *Broker) SetVHostMetadata(name string, m topology.Metadata) error {
	if _, ok := b.VHost(name); !ok {
		return reply.NotFound("no vhost '%s'", name)
	}
	return b.change(setVHostMetadata{VHost: name, Description: m.Description, Tags: m.Tags})
}

func (b *Broker) applySetVHostMetadata(name string, m topology.Metadata) error {
	v, ok := b.VHost(name)
	if !ok {
		return reply.NotFound("no vhost '%s'", name)
	}
	rec := vhostRecordOf(v)
	rec.Description, rec.Tags = m.Description, m.Tags
	if err := b.store.PutMeta(storage.KindVHost, "", name, rec.Table()); err != nil {
		return reply.Internal("could not store the metadata of vhost '%s': %v", name, err)
	}
	v.SetMetadata(m)
	return nil
}

// SetTopicPermission sets a user's rights on the routing keys of exchange
// in a vhost (auth's topic.go), replacing what they had on it.
func (b *Broker) SetTopicPermission(vhost, user, exchange, write, read string) error {
	if exchange == "" {
		return reply.PreconditionFailed("a topic permission names an exchange")
	}
	if _, err := auth.NewTopicPermission(vhost, user, exchange, write, read); err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	return b.change(setTopicPermission{Permission: topicPermissionRecord{VHost: vhost, User: user, Exchange: exchange, Write: write, Read: read}})
}

func (b *Broker) applySetTopicPermission(vhost, user, exchange, write, read string) error {
	if _, ok := b.VHost(vhost); !ok {
		return reply.NotFound("no vhost '%s'", vhost)
	}
	if _, ok := b.users.User(user); !ok {
		return reply.NotFound("no user '%s'", user)
	}
	p, err := auth.NewTopicPermission(vhost, user, exchange, write, read)
	if err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	rec := b.topicPermissionsOf(vhost, user)
	rec.Exchanges = slices.DeleteFunc(rec.Exchanges, func(e topicPermissionRecord) bool { return e.Exchange == exchange })
	rec.Exchanges = append(rec.Exchanges, topicPermissionRecord{Exchange: exchange, Write: write, Read: read})
	if err := b.store.PutMeta(storage.KindTopicPermission, vhost, user, rec.Table()); err != nil {
		return reply.Internal("could not store topic permission: %v", err)
	}
	b.users.SetTopicPermission(vhost, user, p)
	return nil
}

// ClearTopicPermission drops a user's topic permission on exchange in a
// vhost, or with exchange "" all of theirs there.
func (b *Broker) ClearTopicPermission(vhost, user, exchange string) error {
	return b.change(clearTopicPermission{VHost: vhost, User: user, Exchange: exchange})
}

func (b *Broker) applyClearTopicPermission(vhost, user, exchange string) error {
	rec := b.topicPermissionsOf(vhost, user)
	n := len(rec.Exchanges)
	rec.Exchanges = slices.DeleteFunc(rec.Exchanges, func(e topicPermissionRecord) bool { return exchange == "" || e.Exchange == exchange })
	if len(rec.Exchanges) == n {
		return reply.NotFound("user '%s' has no topic permissions in vhost '%s'", user, vhost)
	}
	var err error
	if len(rec.Exchanges) == 0 {
		err = b.store.DeleteMeta(storage.KindTopicPermission, vhost, user)
	} else {
		err = b.store.PutMeta(storage.KindTopicPermission, vhost, user, rec.Table())
	}
	if err != nil {
		return reply.Internal("could not store topic permissions: %v", err)
	}
	b.users.ClearTopicPermission(vhost, user, exchange)
	return nil
}

// topicPermissionsOf is the stored record of a user's topic permissions
// in a vhost, as the auth store holds them.
func (b *Broker) topicPermissionsOf(vhost, user string) topicPermissionsRecord {
	var rec topicPermissionsRecord
	for _, p := range b.users.TopicPermissions() {
		if p.VHost == vhost && p.User == user {
			rec.Exchanges = append(rec.Exchanges, topicPermissionRecord{Exchange: p.Exchange, Write: p.Write, Read: p.Read})
		}
	}
	return rec
}

func topicPermissionRecordOf(p auth.TopicPermissionEntry) topicPermissionRecord {
	return topicPermissionRecord{VHost: p.VHost, User: p.User, Exchange: p.Exchange, Write: p.Write, Read: p.Read}
}

// SetPolicy adds or replaces a policy in a vhost.
func (b *Broker) SetPolicy(vhost, name, pattern string, applyTo policy.ApplyTo, priority int, def protocol.Table) error {
	p, err := policy.New(name, pattern, applyTo, priority, def)
	if err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	return b.change(policyChange(vhost, p))
}

// SetOperatorPolicy adds or replaces an operator policy in a vhost.
func (b *Broker) SetOperatorPolicy(vhost, name, pattern string, applyTo policy.ApplyTo, priority int, def protocol.Table) error {
	p, err := policy.NewOperator(name, pattern, applyTo, priority, def)
	if err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	return b.change(policyChange(vhost, p))
}

func (b *Broker) applySetPolicy(c setPolicy) error {
	v, ok := b.VHost(c.VHost)
	if !ok {
		return reply.NotFound("no vhost '%s'", c.VHost)
	}
	// Checked in full where the change was made (SetPolicy, an import):
	// a change in the log applies as it was accepted.
	p, err := policy.Restore(c.Name, c.Pattern, c.ApplyTo, int(c.Priority), c.Definition)
	if err != nil {
		return reply.PreconditionFailed("%v", err)
	}
	p.Operator = c.Operator
	return v.SetPolicy(p)
}

// ClearPolicy removes a policy from a vhost.
func (b *Broker) ClearPolicy(vhost, name string) error {
	return b.change(clearPolicy{VHost: vhost, Name: name})
}

// ClearOperatorPolicy removes an operator policy from a vhost.
func (b *Broker) ClearOperatorPolicy(vhost, name string) error {
	return b.change(clearPolicy{VHost: vhost, Name: name, Operator: true})
}

func (b *Broker) applyClearPolicy(c clearPolicy) error {
	v, ok := b.VHost(c.VHost)
	if !ok {
		return reply.NotFound("no vhost '%s'", c.VHost)
	}
	return v.DeletePolicy(c.Name, c.Operator)
}

// AdminAddr returns the admin API's bound address, "" before ServeAdmin or
// when admin.listen is "". With port 0 in admin.listen, this is where the
// port chosen shows.
func (b *Broker) AdminAddr() string {
	if b.admin == nil {
		return ""
	}
	return b.admin.Addr
}

// The admin server's timeouts bound how long one HTTP connection can hold
// a slot of admin.max_connections, and a file descriptor, without work
// to show for it. Go's zero values mean "never": a client that sent one
// request and then went quiet held its connection forever.
const (
	adminHeaderTimeout = 10 * time.Second // from the connection's or a request's start to the end of its headers
	adminReadTimeout   = 30 * time.Second // to the end of a request's body (at most admin.max_body_size)
	adminWriteTimeout  = 60 * time.Second // from the end of the headers to the end of the response: enabling a plugin compiles it
	adminIdleTimeout   = 60 * time.Second // between requests on a kept-alive connection
	// adminMaxHeaderBytes bounds a request's line and headers. The
	// handler answers a request line past 8 KiB with RabbitMQ's 414
	// (admin's bounds.go); up to this bound it gets the chance to, past
	// it Go's server answers 431 itself.
	adminMaxHeaderBytes = 128 << 10
)

// untilAnswerDue gives each request a context that ends when its answer
// could no longer be sent: the write timeout counts from the end of the
// headers, and once it has passed the server closes the connection
// whatever the handler does. Work that honours the context (a
// definitions import being checked, a cluster change being waited for)
// stops then instead of running on for nobody.
func untilAnswerDue(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The context as net/http made it (it ends when the client goes
		// away) is kept for AnswerDueLater, which cannot lengthen the
		// timeout set here.
		unbounded := context.WithValue(r.Context(), unboundedKey{}, r.Context())
		ctx, cancel := context.WithTimeout(unbounded, adminWriteTimeout)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// unboundedKey holds, in an admin request's context, its context before
// untilAnswerDue bounded it.
type unboundedKey struct{}

// AnswerDueLater gives an answer that takes longer by design (a CPU
// profile of minutes) extra time past the usual adminWriteTimeout, from
// now: the connection's write deadline moves, and the returned context
// ends then or when the client goes away. Work for the answer honours
// that context instead of the request's; cancel releases it. A request
// served without ServeAdmin (a test's server) gets the same, its own
// context standing for the unbounded one.
func AnswerDueLater(w http.ResponseWriter, r *http.Request, extra time.Duration) (ctx context.Context, cancel context.CancelFunc, err error) {
	due := time.Now().Add(adminWriteTimeout + extra)
	if err := http.NewResponseController(w).SetWriteDeadline(due); err != nil {
		return nil, nil, err
	}
	parent, ok := r.Context().Value(unboundedKey{}).(context.Context)
	if !ok {
		parent = r.Context()
	}
	ctx, cancel = context.WithDeadline(parent, due)
	return ctx, cancel, nil
}

// connLimitListener bounds the connections a listener has open at once.
// Accept first waits for a free slot, so clients beyond the bound wait in
// the kernel's accept queue, where they cost the process no file
// descriptor; a slot is given back when its connection is closed.
type connLimitListener struct {
	net.Listener
	slots     chan struct{} // one token per open connection
	closed    chan struct{}
	closeOnce sync.Once
}

func newConnLimitListener(ln net.Listener, max int) *connLimitListener {
	return &connLimitListener{Listener: ln, slots: make(chan struct{}, max), closed: make(chan struct{})}
}

func (l *connLimitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close also wakes an Accept that waits for a slot.
func (l *connLimitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// slotConn gives its slot back on the first Close; net/http may close a
// connection more than once.
type slotConn struct {
	net.Conn
	releaseOnce sync.Once
	release     func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(c.release)
	return err
}

// CloseWrite keeps the half-close net/http does before closing a
// connection whose request body it did not read.
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
