// Package sanitizetest holds what the tests of plain-text safety share:
// the hostile and ordinary plain-text values of testdata/plaintext.txt,
// written into a feed in every way a feed may escape them (Cases), and
// Check, which tells whether a value published in a plain-text field
// holds markup, using golang.org/x/net/html's parser rather than package
// sanitize, so that the sanitiser is checked by something other than
// itself.
package sanitizetest
