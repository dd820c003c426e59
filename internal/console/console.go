// Package console holds the operator console's files, served by `leasekeeper
// serve` at / (docs/console.md): plain HTML, CSS and JavaScript, no build
// step.
package console

import "embed"

//go:embed index.html app.js app.css
var files embed.FS

// File returns the named file of the console; it panics on a name that is
// not one, as that is a bug of the caller.
func File(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("console: " + err.Error())
	}
	return b
}
