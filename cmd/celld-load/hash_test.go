package main

import (
	"crypto/sha256"
	"encoding/hex"
)

func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
