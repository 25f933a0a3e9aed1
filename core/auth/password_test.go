package auth

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"strings"
	"testing"
)

// RabbitMQ's documented stored form, computed here from its definition:
// base64(salt ++ H(salt ++ password)) with a 4-byte salt.
func rabbitForm(salt []byte, digest []byte) string {
	return base64.StdEncoding.EncodeToString(append(append([]byte(nil), salt...), digest...))
}

func TestHashingAlgorithms(t *testing.T) {
	salt := []byte{0x90, 0x8a, 0x11, 0x3c}
	join := func(pw string) []byte { return append(append([]byte(nil), salt...), pw...) }
	s256 := sha256.Sum256(join("pw-256"))
	s512 := sha512.Sum512(join("pw-512"))
	m5 := md5.Sum(join("pw-md5"))
	cases := []struct {
		h        Hashing
		password string
		stored   string
	}{
		{SHA256, "pw-256", rabbitForm(salt, s256[:])},
		{"", "pw-256", rabbitForm(salt, s256[:])}, // the zero value is SHA-256
		{SHA512, "pw-512", rabbitForm(salt, s512[:])},
		{MD5, "pw-md5", rabbitForm(salt, m5[:])},
		// Made by RabbitMQ 3.10.8: users erin and frank of
		// tests/testdata/rabbitmq-3.10.8-definitions.json, whose logins
		// RabbitMQ accepted with these passwords.
		{SHA512, "erin-pw", "AQIDBLio9SzvEssMq/uuyJgHqD7fLrNCrOuD6XSfiO8HIlZEkTuNq9GnKc+Br8spkYiUK9z0egVQ2dCetKJi6un6XGM="},
		{MD5, "frank-pw", "CQgHBrdL31qHCD9aIoL1dbHO1l0="},
		{SHA256, "test12", rabbitHash},
	}
	for _, c := range cases {
		if err := c.h.Valid(c.stored); err != nil {
			t.Errorf("%s: %s reported invalid: %v", c.h.Name(), c.stored, err)
		}
		if !c.h.Check(c.stored, c.password) {
			t.Errorf("%s: %q does not check against %s", c.h.Name(), c.password, c.stored)
		}
		if c.h.Check(c.stored, c.password+"x") || c.h.Check(c.stored, "") {
			t.Errorf("%s: a wrong password checks", c.h.Name())
		}
		fresh := c.h.Hash(c.password)
		if fresh == c.h.Hash(c.password) || !c.h.Check(fresh, c.password) {
			t.Errorf("%s: fresh hashes are not salted, or do not check", c.h.Name())
		}
	}
	// Hashing under a known salt gives the forms computed from the definition.
	if got := SHA256.withSalt(salt, "pw-256"); got != rabbitForm(salt, s256[:]) {
		t.Errorf("sha256: %s", got)
	}
	if got := SHA512.withSalt(salt, "pw-512"); got != rabbitForm(salt, s512[:]) {
		t.Errorf("sha512: %s", got)
	}
	if got := MD5.withSalt(salt, "pw-md5"); got != rabbitForm(salt, m5[:]) {
		t.Errorf("md5: %s", got)
	}
}

func TestHashOfAnotherAlgorithmNeverChecks(t *testing.T) {
	stored := SHA512.Hash("pw")
	if SHA256.Check(stored, "pw") || MD5.Check(stored, "pw") {
		t.Fatal("a SHA-512 hash checked under another algorithm")
	}
	if err := SHA256.Valid(stored); err == nil || !strings.Contains(err.Error(), "needs 36") {
		t.Fatalf("SHA-256 accepted a SHA-512 hash: %v", err)
	}
	if err := MD5.Valid("not base64!"); err == nil {
		t.Fatal("MD5 accepted a hash that is not base64")
	}
	if err := SHA256.Valid(""); err != nil {
		t.Fatalf("an empty hash (no password) is valid: %v", err)
	}
}

func TestParseHashing(t *testing.T) {
	for _, name := range []string{"rabbit_password_hashing_sha256", "rabbit_password_hashing_sha512", "rabbit_password_hashing_md5"} {
		if h, err := ParseHashing(name); err != nil || h.Name() != name {
			t.Errorf("%s: %v %v", name, h, err)
		}
	}
	if _, err := ParseHashing("rabbit_password_hashing_sha1"); err == nil {
		t.Error("an unknown module was accepted")
	}
}

// A user without a password cannot log in with any, the empty one included.
func TestLoginWithoutPasswordOrWithImportedHash(t *testing.T) {
	s := NewStore(nil)
	s.PutUser(&User{Name: "nopass"})
	s.PutUser(&User{Name: "erin", Hashing: SHA512, PasswordHash: SHA512.Hash("erin-pw")})
	if _, err := s.Login("nopass", "", true); err == nil {
		t.Fatal("a user without a password logged in")
	}
	if _, err := s.Login("erin", "erin-pw", true); err != nil {
		t.Fatalf("a SHA-512 user could not log in: %v", err)
	}
}
