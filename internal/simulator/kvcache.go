package simulator

// blockPool is the KV cache: a fixed number of blocks, each either in use
// (reference count > 0) or free. Free blocks form an LRU list; a free block
// may still hold a cached prefix (a hash), and it is evicted only when it is
// taken for new content. It is owned by the engine goroutine.
type blockPool struct {
	ref  []int32
	hash []uint64 // 0 = the block holds no cached prefix
	// The free list is circular and doubly linked through prev/next, with a
	// sentinel at index len(ref). The head is the least recently freed block,
	// taken first.
	prev, next []int32
	inFree     []bool
	numFree    int
	cached     map[uint64]int32 // prefix hash -> block holding it
}

func newBlockPool(n int) *blockPool {
	p := &blockPool{
		ref:    make([]int32, n),
		hash:   make([]uint64, n),
		prev:   make([]int32, n+1),
		next:   make([]int32, n+1),
		inFree: make([]bool, n),
		cached: make(map[uint64]int32),
	}
	s := int32(n)
	p.prev[s], p.next[s] = s, s
	for b := range int32(n) {
		p.pushFree(b)
	}
	return p
}

func (p *blockPool) total() int      { return len(p.ref) }
func (p *blockPool) sentinel() int32 { return int32(len(p.ref)) }

// usage is the fraction of blocks in use, 0..1. Cached but unreferenced
// blocks count as free, as in vLLM.
func (p *blockPool) usage() float64 {
	return 1 - float64(p.numFree)/float64(len(p.ref))
}

func (p *blockPool) pushFree(b int32) {
	s := p.sentinel()
	last := p.prev[s]
	p.next[last], p.prev[b] = b, last
	p.next[b], p.prev[s] = s, b
	p.inFree[b] = true
	p.numFree++
}

func (p *blockPool) removeFree(b int32) {
	p.next[p.prev[b]] = p.next[b]
	p.prev[p.next[b]] = p.prev[b]
	p.inFree[b] = false
	p.numFree--
}

// lookup appends to dst the blocks that hold the leading hashes, stopping at
// the first hash that is not cached.
func (p *blockPool) lookup(dst []int32, hashes []uint64) []int32 {
	for _, h := range hashes {
		b, ok := p.cached[h]
		if !ok {
			break
		}
		dst = append(dst, b)
	}
	return dst
}

// touch takes a reference on a cached block found by lookup.
func (p *blockPool) touch(b int32) {
	if p.inFree[b] {
		p.removeFree(b)
	}
	p.ref[b]++
}

// allocate takes the least recently freed block, evicting the prefix it
// held. The caller has checked numFree.
func (p *blockPool) allocate() int32 {
	b := p.next[p.sentinel()]
	p.removeFree(b)
	if h := p.hash[b]; h != 0 {
		if p.cached[h] == b {
			delete(p.cached, h)
		}
		p.hash[b] = 0
	}
	p.ref[b] = 1
	return b
}

// release drops one reference on each block, last block first, so that a
// sequence's tail blocks are evicted before its head (which other prompts are
// more likely to share), as vLLM does.
func (p *blockPool) release(blocks []int32) {
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		p.ref[b]--
		if p.ref[b] == 0 {
			p.pushFree(b)
		}
	}
}

// register records that block b now holds the prefix with hash h. When the
// same prefix is already cached in another block (two requests computed it
// at the same time), the existing entry is kept and b stays anonymous.
func (p *blockPool) register(b int32, h uint64) {
	if _, ok := p.cached[h]; ok {
		return
	}
	p.cached[h] = b
	p.hash[b] = h
}
