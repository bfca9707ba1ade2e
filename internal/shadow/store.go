package shadow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Store keeps captured samples, one JSON line each. The proxy's single
// writer goroutine is its only caller, so an implementation need not be safe
// for concurrent Writes; Write may be slow or block, it never delays a
// proxied request.
type Store interface {
	Write(line []byte) error
}

// ErrLineTooLarge is FileStore.Write's error for a line longer than a file
// may be.
var ErrLineTooLarge = errors.New("sample larger than the store's file size")

// FileStore is a bounded, rotating JSONL store: a directory of files
// shadow-NNNNNNNNNN.jsonl (NNNNNNNNNN a sequence number, so that name order
// is write order), each at most MaxFileBytes, at most MaxFiles of them: when
// a new file would exceed the count, the oldest is deleted. A store never
// grows beyond MaxFiles × MaxFileBytes. Each sample is written with one
// write call, so a crash leaves at most one partial last line, which replay
// reports as malformed. Replay reads the directory as one trace
// (source: jsonl).
type FileStore struct {
	dir          string
	maxFileBytes int64
	maxFiles     int

	files   []storeFile // oldest first; the last is being written
	cur     *os.File
	curSize int64
	nextSeq uint64
	bytes   atomic.Int64 // total size of the files
}

type storeFile struct {
	name string
	size int64
}

const (
	storePrefix = "shadow-"
	storeSuffix = ".jsonl"
)

// OpenStore opens (creating it if needed) a store in dir. Files already
// there from an earlier run count towards the bounds; writing starts in a
// new file.
func OpenStore(dir string, maxFileBytes int64, maxFiles int) (*FileStore, error) {
	if maxFileBytes < 1 || maxFiles < 1 {
		return nil, fmt.Errorf("shadow store: max file bytes %d and max files %d must be positive", maxFileBytes, maxFiles)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("shadow store: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shadow store: %w", err)
	}
	s := &FileStore{dir: dir, maxFileBytes: maxFileBytes, maxFiles: maxFiles}
	for _, e := range entries {
		seq, ok := storeSeq(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("shadow store: %w", err)
		}
		s.files = append(s.files, storeFile{name: e.Name(), size: fi.Size()})
		s.bytes.Add(fi.Size())
		s.nextSeq = max(s.nextSeq, seq+1)
	}
	sort.Slice(s.files, func(i, j int) bool { return s.files[i].name < s.files[j].name })
	return s, nil
}

func storeSeq(name string) (uint64, bool) {
	if !strings.HasPrefix(name, storePrefix) || !strings.HasSuffix(name, storeSuffix) {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, storePrefix), storeSuffix), 10, 64)
	return n, err == nil
}

// Dir is the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// Bytes is the total size of the store's files. It is safe to call
// concurrently with Write.
func (s *FileStore) Bytes() int64 { return s.bytes.Load() }

// Write appends one line (line must end with "\n"), rotating first if the
// current file would grow beyond MaxFileBytes.
func (s *FileStore) Write(line []byte) error {
	n := int64(len(line))
	if n > s.maxFileBytes {
		return ErrLineTooLarge
	}
	if s.cur == nil || s.curSize+n > s.maxFileBytes {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	w, err := s.cur.Write(line)
	s.curSize += int64(w)
	s.files[len(s.files)-1].size = s.curSize
	s.bytes.Add(int64(w))
	return err
}

// rotate closes the current file, opens the next and deletes the oldest
// files beyond the bound.
func (s *FileStore) rotate() error {
	if s.cur != nil {
		err := s.cur.Close()
		s.cur = nil
		if err != nil {
			return fmt.Errorf("shadow store: %w", err)
		}
	}
	name := fmt.Sprintf("%s%010d%s", storePrefix, s.nextSeq, storeSuffix)
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("shadow store: %w", err)
	}
	s.nextSeq++
	s.cur, s.curSize = f, 0
	s.files = append(s.files, storeFile{name: name})
	for len(s.files) > s.maxFiles {
		old := s.files[0]
		if err := os.Remove(filepath.Join(s.dir, old.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("shadow store: %w", err)
		}
		s.files = s.files[1:]
		s.bytes.Add(-old.size)
	}
	return nil
}

// Close closes the current file.
func (s *FileStore) Close() error {
	if s.cur == nil {
		return nil
	}
	err := s.cur.Close()
	s.cur = nil
	return err
}
