// The memory behind exactly-once at scale: an aggregation's counted client ids
// (service/rounds/client_id_set.h) against the ordered set of strings that held them
// before (the baseline), for N ids of 20 characters:
//   BM_CountIds            inserting N ids; counter bytes_per_id: heap bytes the structure
//                          holds per id (glibc's mallinfo2, before and after);
//   BM_SnapshotUnderLock   what a checkpoint does under the aggregation's lock: the
//                          baseline copied every id into a vector, ClientIdSet shares
//                          its blocks;
//   BM_EncodeCountedIds    what it then does without the lock: every id into the file's
//                          encoding (reported).
// Run: build/bench/fedagg_rounds_bench --benchmark_repetitions=5 (scripts/bench.sh runs it
// so, after the core benchmark).
#include <malloc.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "service/core/byte_codec.h"
#include "service/rounds/client_id_set.h"

namespace fedagg {
namespace {

// The i-th id: 20 characters, longer than std::string's inline buffer, like most real ids.
std::string IdOf(int64_t i) {
  char id[32];
  std::snprintf(id, sizeof(id), "client-%013lld", static_cast<long long>(i));
  return id;
}

size_t HeapBytesInUse() { return mallinfo2().uordblks; }

struct Baseline {
  using Set = std::set<std::string>;
  static void Insert(Set& set, const std::string& id) { set.insert(id); }
  static std::vector<std::string> Snapshot(const Set& set) { return {set.begin(), set.end()}; }
};

struct Compact {
  using Set = ClientIdSet;
  static void Insert(Set& set, const std::string& id) { set.insert(id); }
  static ClientIdList Snapshot(const Set& set) { return set.Snapshot(); }
};

template <typename Impl>
typename Impl::Set SetOf(int64_t n) {
  typename Impl::Set set;
  for (int64_t i = 0; i < n; ++i) Impl::Insert(set, IdOf(i));
  return set;
}

template <typename Impl>
void BM_CountIds(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids.push_back(IdOf(i));
  double bytes_per_id = 0;
  for (auto _ : state) {
    const size_t before = HeapBytesInUse();
    typename Impl::Set set;
    for (const std::string& id : ids) Impl::Insert(set, id);
    bytes_per_id = static_cast<double>(HeapBytesInUse() - before) / static_cast<double>(n);
    benchmark::DoNotOptimize(set);
    state.PauseTiming();  // freeing the set is not counting
    { typename Impl::Set freed = std::move(set); }
    state.ResumeTiming();
  }
  state.counters["bytes_per_id"] = bytes_per_id;
  state.SetItemsProcessed(state.iterations() * n);
}

template <typename Impl>
void BM_SnapshotUnderLock(benchmark::State& state) {
  const typename Impl::Set set = SetOf<Impl>(state.range(0));
  for (auto _ : state) {
    auto snapshot = Impl::Snapshot(set);
    benchmark::DoNotOptimize(snapshot);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_EncodeCountedIds(benchmark::State& state) {
  const ClientIdList list = SetOf<Compact>(state.range(0)).Snapshot();
  for (auto _ : state) {
    ByteWriter out;
    out.Put<uint64_t>(list.size());
    list.ForEach([&](absl::string_view id) { out.PutString(id); });
    benchmark::DoNotOptimize(out.Take());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void Sizes(benchmark::internal::Benchmark* b) { b->Arg(10'000)->Arg(100'000)->Arg(1'000'000); }

BENCHMARK_TEMPLATE(BM_CountIds, Baseline)->Apply(Sizes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_CountIds, Compact)->Apply(Sizes)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_SnapshotUnderLock, Baseline)->Apply(Sizes)->Unit(benchmark::kNanosecond);
BENCHMARK_TEMPLATE(BM_SnapshotUnderLock, Compact)->Apply(Sizes)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_EncodeCountedIds)->Apply(Sizes)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fedagg

BENCHMARK_MAIN();
