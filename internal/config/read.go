package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// errTooLarge: the file holds more than the limit it was read with.
var errTooLarge = errors.New("file too large")

// secretReadTimeout bounds the read of one bearer_token_file that is not a
// regular file (a FIFO, a device): a secret is a file, not a stream, and a
// load must not hang on one. A variable for the tests.
var secretReadTimeout = 10 * time.Second

// ReadFile reads a configuration file of at most MaxFileBytes. A larger file
// is refused after reading MaxFileBytes+1 bytes (so /dev/zero is refused at
// once). The read ends when ctx does, even on a FIFO that has no writer:
// the error is then an *Error that wraps ctx.Err(). Errors name the file.
func ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, err := readBounded(ctx, path, MaxFileBytes)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, &Error{File: path, Reason: fmt.Sprintf("file larger than %s (config.MaxFileBytes)", byteSize(MaxFileBytes)), Err: err}
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, &Error{File: path, Reason: "not read: " + ctx.Err().Error(), Err: ctx.Err()}
	case err != nil:
		return nil, &Error{File: path, Reason: err.Error(), Err: err}
	}
	return data, nil
}

// LoadFileContext reads, parses and validates a configuration file. The
// reads (the file's, and its bearer_token_files') end when ctx does, so a
// SIGTERM during a load that blocks (a FIFO with no writer) ends it.
func LoadFileContext(ctx context.Context, path string) (*Config, error) {
	data, err := ReadFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return ParseContext(ctx, data, path)
}

// readAtMost reads r to its end, or fails with errTooLarge past limit
// bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// readWaiting reads name in a goroutine and returns when it has, or when
// ctx ends. The goroutine then outlives the call, blocked in the open or
// the read, until the file gives data or its end (a FIFO: until a writer
// comes and goes); what it read is dropped. It is the reader of the
// systems where readBounded cannot wait on the file itself.
func readWaiting(ctx context.Context, name string, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1) // buffered: a late reader never blocks
	go func() {
		f, err := os.Open(name)
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
			done <- result{nil, errTooLarge}
			return
		}
		data, err := readAtMost(f, limit)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readBearerToken reads file, the bearer_token_file of the target or module
// at p (none: nothing to read), into token; an error is the file's.
func (v *validator) readBearerToken(ctx context.Context, dir string, p path, file string, token *Secret) {
	if file == "" {
		return
	}
	secret, err := readSecret(ctx, dir, file)
	if err != nil {
		v.add(p, "bearer_token_file", err.Error())
		return
	}
	*token = secret
}

// readSecret reads a secret file, relative to dir unless absolute. The error
// names no content: the path is not secret, the content is, and it is never
// read into a message. A secret is at most MaxSecretBytes; a read that
// blocks (a FIFO without a writer) ends with ctx or after
// secretReadTimeout.
func readSecret(ctx context.Context, dir, file string) (Secret, error) {
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	ctx, cancel := context.WithTimeout(ctx, secretReadTimeout)
	defer cancel()
	b, err := readBounded(ctx, file, MaxSecretBytes)
	var pe *fs.PathError
	switch {
	case errors.Is(err, errTooLarge):
		return "", fmt.Errorf("cannot read: larger than %s (config.MaxSecretBytes): is it the token file?", byteSize(MaxSecretBytes))
	case errors.Is(err, context.DeadlineExceeded):
		return "", fmt.Errorf("cannot read: no data within %v (a FIFO without a writer?)", secretReadTimeout)
	case errors.Is(err, context.Canceled):
		return "", fmt.Errorf("cannot read: %v", err)
	case errors.As(err, &pe):
		return "", fmt.Errorf("cannot read: %v", pe.Err)
	case err != nil:
		return "", fmt.Errorf("cannot read: %v", err)
	}
	return Secret(strings.TrimSpace(string(b))), nil
}
