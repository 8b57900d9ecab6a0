package websub

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"hash"
	"strings"
)

// SignatureHeader carries the HMAC of a distributed document.
const SignatureHeader = "X-Hub-Signature"

// Signature errors.
var (
	// ErrNoSignature: the subscription has a secret and the request no
	// X-Hub-Signature.
	ErrNoSignature = errors.New("websub: X-Hub-Signature missing")
	// ErrSignatureMethod: the signature names a method other than sha1,
	// sha256, sha384 or sha512, or is not method=hex.
	ErrSignatureMethod = errors.New("websub: X-Hub-Signature is not sha1|sha256|sha384|sha512=HEX")
	// ErrBadSignature: the signature does not match the body.
	ErrBadSignature = errors.New("websub: X-Hub-Signature does not match the body")
)

// Sign returns the X-Hub-Signature value of body under secret, with
// sha256: "sha256=" and the hex HMAC.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks an X-Hub-Signature value (method=hex, with one of the
// spec's methods sha1, sha256, sha384, sha512) against body and secret.
func Verify(secret string, body []byte, header string) error {
	header = strings.TrimSpace(header)
	if header == "" {
		return ErrNoSignature
	}
	method, sig, ok := strings.Cut(header, "=")
	if !ok || len(sig) > 2*sha512.Size {
		return ErrSignatureMethod
	}
	var h func() hash.Hash
	switch strings.ToLower(strings.TrimSpace(method)) {
	case "sha1":
		h = sha1.New
	case "sha256":
		h = sha256.New
	case "sha384":
		h = sha512.New384
	case "sha512":
		h = sha512.New
	default:
		return ErrSignatureMethod
	}
	got, err := hex.DecodeString(strings.TrimSpace(sig))
	if err != nil {
		return ErrSignatureMethod
	}
	m := hmac.New(h, []byte(secret))
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return ErrBadSignature
	}
	return nil
}
