package auth

import "testing"

// The password hash RabbitMQ's documentation gives for "test12", made by
// rabbit_password_hashing_sha256: a definitions file moves between the two.
const rabbitHash = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR"

func TestRabbitMQPasswordHash(t *testing.T) {
	if !CheckPassword(rabbitHash, "test12") {
		t.Fatal("RabbitMQ's hash of test12 does not check")
	}
	if CheckPassword(rabbitHash, "test13") {
		t.Fatal("a wrong password checks")
	}
	h := HashPassword("secret")
	if h == HashPassword("secret") {
		t.Fatal("hashes are not salted")
	}
	if !CheckPassword(h, "secret") || CheckPassword(h, "") || CheckPassword("not base64!", "secret") {
		t.Fatal("round trip failed")
	}
}

func TestLoginAndLoopback(t *testing.T) {
	s := NewStore([]string{"guest"})
	s.PutUser(&User{Name: "guest", PasswordHash: HashPassword("guest")})
	s.PutUser(&User{Name: "alice", PasswordHash: HashPassword("pw")})
	s.PutUser(&User{Name: "nopass"})
	if _, err := s.Login("guest", "guest", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Login("guest", "guest", false); err == nil {
		t.Fatal("guest logged in from afar")
	}
	if _, err := s.Login("alice", "pw", false); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"alice", "wrong"}, {"bob", "pw"}, {"nopass", ""}} {
		if _, err := s.Login(c[0], c[1], true); err != ErrBadCredentials {
			t.Fatalf("%v: %v", c, err)
		}
	}
}

func TestPermissions(t *testing.T) {
	p, err := NewPermission("^app-.*", ".*", "")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		got, want bool
		what      string
	}{
		{p.CanConfigure("app-q"), true, "configure app-q"},
		{p.CanConfigure("other"), false, "configure other"},
		{p.CanWrite(""), true, "write the default exchange"},
		{p.CanRead("anything"), false, "read with an empty expression"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %v", c.what, c.got)
		}
	}
	if _, err := NewPermission("(", ".*", ".*"); err == nil {
		t.Fatal("a bad expression was accepted")
	}
	// The default exchange is matched as amq.default.
	q, _ := NewPermission("", "^amq\\.default$", "")
	if !q.CanWrite("") || q.CanWrite("x") {
		t.Fatal("the default exchange is not amq.default to permissions")
	}
}

func TestParsePlain(t *testing.T) {
	u, p, err := ParsePlain([]byte("\x00guest\x00secret"))
	if err != nil || u != "guest" || p != "secret" {
		t.Fatalf("%q %q %v", u, p, err)
	}
	if _, _, err := ParsePlain([]byte("guest")); err == nil {
		t.Fatal("malformed PLAIN accepted")
	}
}

func TestValidHash(t *testing.T) {
	if err := SHA256.Valid(HashPassword("x")); err != nil {
		t.Fatalf("a hash HashPassword made is not valid: %v", err)
	}
	// RabbitMQ 3.10.8's hash of "guest", from its /api/users.
	if h := "ctxOjaoYQs4WVgZMSUT+O40TlWVHWmV5UPi8ZM7yBg4sLBZQ"; SHA256.Valid(h) != nil || !CheckPassword(h, "guest") {
		t.Fatal("RabbitMQ's hash of guest is not accepted")
	}
	for _, bad := range []string{"not base64!", "AAAA"} {
		if SHA256.Valid(bad) == nil {
			t.Errorf("Valid(%q)", bad)
		}
	}
}
