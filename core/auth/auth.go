// Package auth holds users, their passwords and their permissions in each
// vhost, and answers the two questions a connection asks: who is this, and
// may they do that here.
//
// Passwords are stored the way RabbitMQ stores them: base64 of a 4-byte
// salt followed by H(salt ++ password), where H is the user's hashing
// algorithm, one of RabbitMQ's three (password.go). Warren hashes new
// passwords with SHA-256 (rabbit_password_hashing_sha256, RabbitMQ's
// default); users imported from RabbitMQ keep their hashes and algorithms,
// so definitions move between the two and passwords keep working.
//
// Permissions are three regular expressions per user and vhost, matched
// against resource names: configure (declare, delete), write (publish,
// bind into) and read (consume, get, purge, bind from). An empty expression
// matches nothing. Like RabbitMQ, the default exchange is matched as
// "amq.default". Which operation needs which is said once, by Grant
// (grant.go), and asked by every way in: AMQP, the management API, and the
// protocols to come.
package auth

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/warrenmq/warren/internal/lockorder"
)

// ErrBadCredentials is the one answer to a failed login: it does not say
// whether the user or the password was wrong.
var ErrBadCredentials = errors.New("invalid credentials")

// User is an account.
type User struct {
	Name         string
	PasswordHash string  // base64(salt ++ H(salt ++ password)); "" allows no password login
	Hashing      Hashing // H; "" means SHA256
	Tags         []string
	// Limits are the user's (UserMaxConnections, UserMaxChannels), by
	// name; one not set, or negative, is none.
	Limits map[string]int64
}

// The limits a user takes, as RabbitMQ's user limits.
const (
	UserMaxConnections = "max-connections"
	UserMaxChannels    = "max-channels"
)

// Limit is the named limit when it is set and not negative.
func (u *User) Limit(name string) (int64, bool) {
	n, ok := u.Limits[name]
	return n, ok && n >= 0
}

// CheckUserLimits refuses a name a user has no limit of, in RabbitMQ
// 3.10.8's words.
func CheckUserLimits(l map[string]int64) error {
	for _, name := range slices.Sorted(maps.Keys(l)) {
		if name != UserMaxConnections && name != UserMaxChannels {
			return fmt.Errorf("Unrecognised terms [{<<%q>>,%d}] in user-limits", name, l[name])
		}
	}
	return nil
}

// HasTag reports whether the user carries a tag such as "administrator".
func (u *User) HasTag(tag string) bool {
	for _, t := range u.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// Permission is a user's rights in one vhost.
type Permission struct {
	Configure, Write, Read string
	configure, write, read *regexp.Regexp
}

// NewPermission compiles the three expressions; a bad one is an error that
// names it.
func NewPermission(configure, write, read string) (*Permission, error) {
	p := &Permission{Configure: configure, Write: write, Read: read}
	var err error
	if p.configure, err = compile("configure", configure); err != nil {
		return nil, err
	}
	if p.write, err = compile("write", write); err != nil {
		return nil, err
	}
	if p.read, err = compile("read", read); err != nil {
		return nil, err
	}
	return p, nil
}

func compile(which, expr string) (*regexp.Regexp, error) {
	switch expr {
	case "":
		return nil, nil
	case ".*":
		return matchAll, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("bad %s permission %q: %v", which, expr, err)
	}
	return re, nil
}

// matchAll stands for ".*", the permission nearly everyone has: checking
// it needs no regular expression, which matters on the publish path.
var matchAll = regexp.MustCompile(".*")

func permits(re *regexp.Regexp, name string) bool {
	if re == matchAll {
		return true
	}
	if name == "" {
		name = "amq.default"
	}
	return re != nil && re.MatchString(name)
}

func (p *Permission) CanConfigure(name string) bool { return permits(p.configure, name) }
func (p *Permission) CanWrite(name string) bool     { return permits(p.write, name) }
func (p *Permission) CanRead(name string) bool      { return permits(p.read, name) }

// Store is the broker's users and permissions. It is safe for concurrent use.
type Store struct {
	mu       lockorder.RWMutex[lockorder.AuthStore]
	users    map[string]*User
	perms    map[string]map[string]*Permission // vhost -> user -> permission
	loopback map[string]bool                   // users allowed only from loopback
	// topics are the topic permissions (topic.go), swapped whole under
	// mu and read without it.
	topics atomic.Pointer[topicSet]
}

// NewStore returns an empty store. loopbackOnly names users who may only
// connect from the local host (RabbitMQ's loopback_users: guest by default).
func NewStore(loopbackOnly []string) *Store {
	s := &Store{users: make(map[string]*User), perms: make(map[string]map[string]*Permission), loopback: make(map[string]bool)}
	for _, u := range loopbackOnly {
		s.loopback[u] = true
	}
	return s
}

// PutUser adds or replaces a user.
func (s *Store) PutUser(u *User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.Name] = u
}

// DeleteUser removes a user and their permissions.
func (s *Store) DeleteUser(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[name]; !ok {
		return false
	}
	delete(s.users, name)
	for _, m := range s.perms {
		delete(m, name)
	}
	s.changeTopics(func(t topicSet) {
		for k := range t {
			if k.user == name {
				delete(t, k)
			}
		}
	})
	return true
}

// User returns a user by name.
func (s *Store) User(name string) (*User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	return u, ok
}

// Users lists users by name.
func (s *Store) Users() []*User {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*User, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetPermission grants a user rights in a vhost.
func (s *Store) SetPermission(vhost, user string, p *Permission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perms[vhost] == nil {
		s.perms[vhost] = make(map[string]*Permission)
	}
	s.perms[vhost][user] = p
}

// ClearPermission revokes a user's rights in a vhost.
func (s *Store) ClearPermission(vhost, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.perms[vhost], user)
}

// ClearVHost drops every permission in a deleted vhost.
func (s *Store) ClearVHost(vhost string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.perms, vhost)
	s.changeTopics(func(t topicSet) {
		for k := range t {
			if k.vhost == vhost {
				delete(t, k)
			}
		}
	})
}

// Permission returns a user's rights in a vhost.
func (s *Store) Permission(vhost, user string) (*Permission, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.perms[vhost][user]
	return p, ok
}

// PermissionEntry is one grant, for listings.
type PermissionEntry struct {
	VHost, User string
	*Permission
}

// Permissions lists every grant, sorted by vhost then user.
func (s *Store) Permissions() []PermissionEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []PermissionEntry
	for vh, m := range s.perms {
		for u, p := range m {
			out = append(out, PermissionEntry{VHost: vh, User: u, Permission: p})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].VHost != out[j].VHost {
			return out[i].VHost < out[j].VHost
		}
		return out[i].User < out[j].User
	})
	return out
}

// Login checks a user's password. fromLoopback says whether the client
// connected from the local host; loopback-only users are refused otherwise.
func (s *Store) Login(name, password string, fromLoopback bool) (*User, error) {
	s.mu.RLock()
	u, ok := s.users[name]
	loopbackOnly := s.loopback[name]
	s.mu.RUnlock()
	if !ok || !u.Hashing.Check(u.PasswordHash, password) {
		return nil, ErrBadCredentials
	}
	if loopbackOnly && !fromLoopback {
		return nil, fmt.Errorf("user '%s' can only connect via localhost", name)
	}
	return u, nil
}

// ParsePlain reads a SASL PLAIN response: authzid NUL authcid NUL password.
func ParsePlain(response []byte) (user, password string, err error) {
	parts := bytes.Split(response, []byte{0})
	if len(parts) != 3 {
		return "", "", errors.New("malformed PLAIN response")
	}
	return string(parts[1]), string(parts[2]), nil
}
