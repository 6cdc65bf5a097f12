"""lavaflow.sim."""

# A simulation is one batch run: it allocates millions of objects that live to its end (pods,
# tasks, records) and makes few reference cycles, so the collector's default thresholds (a young
# collection per 700 allocations, full ones as the heap grows) spend a tenth to a sixth of a run
# scanning live objects. Fewer, larger collections free the same. `lavaflow simulate` sets these
# for its process; so do the benchmarks that stand for it. A young collection per million
# allocations: at 100,000 a replay of a 160-job Pollux workload made about 40 of them, 0.12 to
# 0.22 s of its 5 to 8 s, scanning pods and records that live to the end, to free about 2,400
# objects in all (issue 31); the garbage left for longer is at most a million allocations' worth.
BATCH_GC_THRESHOLDS = (1_000_000, 20, 10)
