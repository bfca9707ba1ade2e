//go:build !unix

package main

import "errors"

func raiseFileLimit() (soft, hard uint64, err error) {
	return 0, 0, errors.New("no open-file limit on this system")
}
