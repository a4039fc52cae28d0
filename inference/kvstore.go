package inference

// KVStore keeps the KV rows of many sequences beyond those open in the
// model's pool (package kvstore). The engine uses it only from its worker,
// between model calls, so a restore is complete before the Step that relies
// on it.
type KVStore interface {
	// Restore passes the rows [from, n) of owner's longest saved prefix of
	// seq to put, in order, and returns n; n <= from: nothing to restore.
	Restore(owner string, seq []int32, from int, put func(pos int, rows []byte) error) (int, error)
	// Save stores the rows of seq for owner, calling get for the rows it
	// does not hold yet. tag is the client's hint (prompt_cache_key or
	// user): the owner's previous entry under the same tag is replaced.
	Save(owner, tag string, seq []int32, get func(from, to int, dst []byte) error) error
	Stats() KVStats
}

// KVStats is a KV store's size and counters.
type KVStats struct {
	Entries     int   `json:"entries"`
	Bytes       int64 `json:"bytes"`
	Budget      int64 `json:"budget_bytes"`
	Evictions   int64 `json:"evictions"`
	DiskEntries int   `json:"disk_entries"`
	DiskBytes   int64 `json:"disk_bytes"`
	DiskBudget  int64 `json:"disk_budget_bytes"`
}

// CommonPrefix is how many leading tokens a and b share: the KV rows one's
// sequence holds that serve the other.
func CommonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// boundStore binds a store to the model's sequences; nil when either is
// missing.
type boundStore struct {
	store KVStore
	model SeqKVSnapshotter
}

func bindStore(s KVStore, m Model) *boundStore {
	snap, ok := m.(SeqKVSnapshotter)
	if s == nil || !ok {
		return nil
	}
	return &boundStore{store: s, model: snap}
}

// restore copies the owner's longest saved prefix of toks (rows to hold:
// a prompt but its last token, or a preempted sequence's committed rows)
// into sequence s, which holds rows [0, from) already, when the store
// holds more; it returns how many rows s holds then.
func (k *boundStore) restore(e *Engine, s *seq, toks []int32, from int) int {
	if k == nil {
		return from
	}
	toks = toks[:e.reusable(s, len(toks))]
	if len(toks) <= from {
		return from
	}
	g := s.g
	n, err := k.store.Restore(g.req.Owner, toks, from, func(pos int, rows []byte) error {
		return k.model.RestoreSeqKV(s.id, pos, rows)
	})
	// Rows restored past an alignment boundary are replaced by the next run.
	n = e.reusable(s, n)
	if err != nil || n <= from {
		if err != nil {
			// Rows from from on may be partly overwritten: they are
			// evaluated again.
			e.log.Warn().Err(err).Msg("kv store: restore failed")
		}
		e.met.kvMisses.Inc()
		return from
	}
	if r, ok := k.model.(SeqTokenRecorder); ok {
		r.RestoredTokens(s.id, toks[:n])
	}
	e.met.kvHits.Inc()
	e.met.kvRestored.Add(float64(n - from))
	return n
}

// save stores the committed rows of a finished sequence (tag: its
// request's CacheKey) or of one released to make room (""): those a later
// sequence may reuse (Engine.reusable).
func (k *boundStore) save(e *Engine, s *seq, tag string) {
	if k == nil || s.shifted {
		return // a shifted sequence's rows are not the KV of a prefix of its tokens
	}
	rows := e.reusable(s, s.committed)
	if rows == 0 {
		return
	}
	req := &s.g.req
	err := k.store.Save(req.Owner, tag, s.toks[:rows], func(from, to int, dst []byte) error {
		return k.model.SaveSeqKV(s.id, from, to, dst)
	})
	if err != nil {
		e.log.Warn().Err(err).Msg("kv store: save failed")
	}
}

// KVStats reports the engine's KV store, if it has one.
func (e *Engine) KVStats() (KVStats, bool) {
	if e.kv == nil {
		return KVStats{}, false
	}
	return e.kv.store.Stats(), true
}
