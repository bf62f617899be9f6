// Command htpasswd prints one htpasswd line, USER:BCRYPT-HASH, for the password read from
// stdin: what the distribution registry's htpasswd auth reads (hack/registry.sh secure mode).
// It uses the bcrypt package the registry itself verifies with, so no apache2-utils is needed.
//
// Usage: printf %s PASSWORD | htpasswd USER
package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: printf %s PASSWORD | htpasswd USER")
		os.Exit(2)
	}
	password, err := io.ReadAll(os.Stdin)
	if err != nil || len(password) == 0 {
		fmt.Fprintln(os.Stderr, "htpasswd: no password on stdin")
		os.Exit(1)
	}
	hash, err := bcrypt.GenerateFromPassword(password, bcrypt.DefaultCost)
	if err != nil {
		fmt.Fprintln(os.Stderr, "htpasswd:", err)
		os.Exit(1)
	}
	fmt.Printf("%s:%s\n", os.Args[1], hash)
}
