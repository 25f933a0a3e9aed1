package auth

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Topic permissions narrow, per user, vhost and topic exchange, which
// routing keys the user may publish with (write) and bind with (read),
// as RabbitMQ 3.10's do: a user with no topic permission on an exchange
// is not narrowed there; an empty expression allows only the empty
// routing key; "{username}" and "{vhost}" in an expression stand for the
// permission's own user and vhost. ("{client_id}" is a placeholder only
// MQTT connections fill in; for AMQP 0-9-1 it stays as written, as in
// RabbitMQ.) Only exchanges of type topic are checked; which checks a
// caller makes is Grant's (grant.go).

// TopicPermission is a user's rights on the routing keys of one exchange
// in one vhost.
type TopicPermission struct {
	Exchange, Write, Read string
	write, read           *regexp.Regexp // expanded for the permission's user and vhost
}

// NewTopicPermission compiles the two expressions for user in vhost; a
// bad one is an error that names it.
func NewTopicPermission(vhost, user, exchange, write, read string) (*TopicPermission, error) {
	p := &TopicPermission{Exchange: exchange, Write: write, Read: read}
	var err error
	if p.write, err = compileTopic("write", write, vhost, user); err != nil {
		return nil, err
	}
	if p.read, err = compileTopic("read", read, vhost, user); err != nil {
		return nil, err
	}
	return p, nil
}

// compileTopic checks expr as written, then compiles it with the
// variables expanded (values are not escaped: RabbitMQ substitutes them
// as text).
func compileTopic(which, expr, vhost, user string) (*regexp.Regexp, error) {
	if expr == "" {
		expr = "^$"
	}
	if _, err := regexp.Compile(expr); err != nil {
		return nil, fmt.Errorf("bad %s topic permission %q: %v", which, expr, err)
	}
	expanded := strings.NewReplacer("{username}", user, "{vhost}", vhost).Replace(expr)
	re, err := regexp.Compile(expanded)
	if err != nil {
		// A user or vhost name that is not a valid expression where
		// it stands: nothing matches, as nothing could.
		return regexp.MustCompile(`[^\s\S]`), nil
	}
	return re, nil
}

// topicKey names a topic permission.
type topicKey struct{ vhost, user, exchange string }

// topicSet is the broker's topic permissions: replaced whole on each
// change (they change rarely), read without a lock on the publish path.
type topicSet map[topicKey]*TopicPermission

// SetTopicPermission sets a user's rights on exchange's routing keys in
// a vhost, replacing what they had on it.
func (s *Store) SetTopicPermission(vhost, user string, p *TopicPermission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changeTopics(func(t topicSet) { t[topicKey{vhost, user, p.Exchange}] = p })
}

// ClearTopicPermission drops a user's topic permission on exchange in a
// vhost, or, with exchange "", all of theirs there. It reports whether
// there was any.
func (s *Store) ClearTopicPermission(vhost, user, exchange string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	s.changeTopics(func(t topicSet) {
		for k := range t {
			if k.vhost == vhost && k.user == user && (exchange == "" || k.exchange == exchange) {
				delete(t, k)
				found = true
			}
		}
	})
	return found
}

// changeTopics publishes a changed copy of the topic permissions; mu is
// held.
func (s *Store) changeTopics(change func(topicSet)) {
	old := s.topicSet()
	next := make(topicSet, len(old)+1)
	for k, p := range old {
		next[k] = p
	}
	change(next)
	s.topics.Store(&next)
}

func (s *Store) topicSet() topicSet {
	if t := s.topics.Load(); t != nil {
		return *t
	}
	return nil
}

// TopicPermission returns a user's topic permission on exchange in a
// vhost.
func (s *Store) TopicPermission(vhost, user, exchange string) (*TopicPermission, bool) {
	p, ok := s.topicSet()[topicKey{vhost, user, exchange}]
	return p, ok
}

// TopicPermissionEntry is one topic permission, for listings.
type TopicPermissionEntry struct {
	VHost, User string
	*TopicPermission
}

// TopicPermissions lists the topic permissions, sorted by vhost, user and
// exchange.
func (s *Store) TopicPermissions() []TopicPermissionEntry {
	t := s.topicSet()
	out := make([]TopicPermissionEntry, 0, len(t))
	for k, p := range t {
		out = append(out, TopicPermissionEntry{VHost: k.vhost, User: k.user, TopicPermission: p})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.VHost != b.VHost {
			return a.VHost < b.VHost
		}
		if a.User != b.User {
			return a.User < b.User
		}
		return a.Exchange < b.Exchange
	})
	return out
}

// TopicRefusal is a routing key a topic permission does not allow. Its
// text is RabbitMQ 3.10.8's, without the AMQP code (which does not say
// whether write or read was refused).
type TopicRefusal struct {
	User, VHost, Exchange string
	Perm                  string // "write" or "read"
	RoutingKey            string
}

func (r *TopicRefusal) Error() string {
	return fmt.Sprintf("access to topic '%s' in exchange '%s' in vhost '%s' refused for user '%s'",
		r.RoutingKey, r.Exchange, r.VHost, r.User)
}
