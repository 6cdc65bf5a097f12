"""lavaflow.sim."""

# A simulation is one batch run: it allocates millions of objects that live to its end (pods,
# tasks, records) and makes few reference cycles, so the collector's default thresholds (a young
# collection per 700 allocations, full ones as the heap grows) spend a tenth to a sixth of a run
# scanning live objects. Fewer, larger collections free the same. `lavaflow simulate` sets these
# for its process; so do the benchmarks that stand for it.
BATCH_GC_THRESHOLDS = (100_000, 20, 10)
