// jemalloc's settings for the simulating programs (aegis, bench/), compiled into each of
// them through the aegis_sim_allocator interface library when AEGIS_SIM_ALLOCATOR is
// jemalloc; not part of aegis_sim (aegisd and the tests keep the system allocator).
// jemalloc reads `malloc_conf` at start-up; the MALLOC_CONF environment variable still
// overrides it.
//
// Why: a million-job run touches about 450 MB, mostly small objects allocated once and
// kept to the end (records, attempts, trace jobs). In 4 KiB pages that is over 100,000
// page faults, about 8 % of the run on this VM (each fault a trip through the
// hypervisor), and a TLB miss on most record accesses. So:
// - thp:always, metadata_thp:always: jemalloc asks for transparent huge pages on its
//   memory (the kernel's default here is madvise-only), 2 MiB a fault;
// - dirty_decay_ms:-1, muzzy_decay_ms:-1: freed pages are kept for reuse rather than
//   given back to the OS over the next seconds (a simulation is a few seconds long, and
//   giving back splits huge pages and faults them in again). Peak RSS at 1.07M jobs:
//   418 to about 490 MB (the target is 600 MB).
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's.
extern const char* malloc_conf;
const char* malloc_conf = "thp:always,metadata_thp:always,dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
