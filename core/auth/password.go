package auth

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
)

// Hashing names one of RabbitMQ's password hashing modules, as definitions
// files write it in a user's hashing_algorithm. All three store
// base64(salt ++ H(salt ++ password)) with a 4-byte salt; they differ only
// in H. The zero value means SHA256, the algorithm of every user Warren
// stored before it recorded one.
type Hashing string

// RabbitMQ's three hashing modules. MD5 is what RabbitMQ before 3.6 used,
// and what its definitions files without hashing_algorithm mean.
const (
	SHA256 Hashing = "rabbit_password_hashing_sha256"
	SHA512 Hashing = "rabbit_password_hashing_sha512"
	MD5    Hashing = "rabbit_password_hashing_md5"
)

// saltLen is RabbitMQ's salt length in bytes.
const saltLen = 4

// ParseHashing accepts one of RabbitMQ's hashing module names. Any other is
// an error: a user whose hash Warren cannot check could never log in.
func ParseHashing(name string) (Hashing, error) {
	switch h := Hashing(name); h {
	case SHA256, SHA512, MD5:
		return h, nil
	}
	return "", fmt.Errorf("unknown hashing algorithm %q (want %s, %s or %s)", name, SHA256, SHA512, MD5)
}

// Name is the module name, SHA256's for the zero value.
func (h Hashing) Name() string {
	if h == "" {
		return string(SHA256)
	}
	return string(h)
}

func (h Hashing) newHash() hash.Hash {
	switch h {
	case SHA512:
		return sha512.New()
	case MD5:
		return md5.New()
	}
	return sha256.New()
}

// Hash returns password's stored form under a fresh random salt.
func (h Hashing) Hash(password string) string {
	salt := make([]byte, saltLen)
	_, _ = rand.Read(salt)
	return h.withSalt(salt, password)
}

func (h Hashing) withSalt(salt []byte, password string) string {
	d := h.newHash()
	d.Write(salt)
	d.Write([]byte(password))
	return base64.StdEncoding.EncodeToString(d.Sum(append([]byte(nil), salt...)))
}

// Check reports whether password matches a stored hash. An empty hash
// matches nothing: a user without a password cannot log in with one, as
// in RabbitMQ.
func (h Hashing) Check(stored, password string) bool {
	raw, err := base64.StdEncoding.DecodeString(stored)
	if err != nil || len(raw) != saltLen+h.newHash().Size() {
		return false
	}
	want, _ := base64.StdEncoding.DecodeString(h.withSalt(raw[:saltLen], password))
	return subtle.ConstantTimeCompare(raw, want) == 1
}

// Valid says why a stored hash can never match under h, or returns nil.
// "" is valid: it is a user without a password.
func (h Hashing) Valid(stored string) error {
	if stored == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(stored)
	if err != nil {
		return fmt.Errorf("not base64: %v", err)
	}
	if want := saltLen + h.newHash().Size(); len(raw) != want {
		return fmt.Errorf("%d bytes decoded, %s needs %d (a %d-byte salt and the digest)", len(raw), h.Name(), want, saltLen)
	}
	return nil
}

// HashPassword returns RabbitMQ's salted SHA-256 form of a password, the
// form Warren gives every password it is told.
func HashPassword(password string) string { return SHA256.Hash(password) }

// CheckPassword reports whether password matches a salted SHA-256 hash.
func CheckPassword(stored, password string) bool { return SHA256.Check(stored, password) }
