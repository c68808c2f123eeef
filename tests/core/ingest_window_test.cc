// IngestWindow and IngestTicket: requests that fit are granted inline; others wait, in
// arrival order, and are granted on the window's thread when tickets are freed; an update
// larger than the window goes alone; waiting asks the pressure handler to free bytes;
// Close refuses waiters and later requests; an UpdateBuffer holds its ticket until freed.
#include "service/core/ingest_window.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "service/core/mutex.h"
#include "service/core/update_buffer.h"
#include "tests/core/core_test_util.h"

namespace fedagg::testing {
namespace {

// Collects the grants of one request, to be awaited from the test's thread.
class GrantBox {
 public:
  IngestWindow::Grant Callback() {
    return [this](absl::StatusOr<IngestTicket> ticket) {
      MutexLock lock(&mu_);
      granted_thread_ = std::this_thread::get_id();
      result_.emplace(std::move(ticket));
    };
  }
  bool ready() {
    MutexLock lock(&mu_);
    return result_.has_value();
  }
  // Waits up to 10 s for the grant; the ticket or the refusal.
  absl::StatusOr<IngestTicket> Take() {
    MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return result_.has_value(); },
                              absl::Seconds(10))) {
      return absl::DeadlineExceededError("no grant within 10 s");
    }
    absl::StatusOr<IngestTicket> out = *std::move(result_);
    result_.reset();
    return out;
  }
  std::thread::id granted_thread() {
    MutexLock lock(&mu_);
    return granted_thread_;
  }

 private:
  Mutex mu_;
  std::optional<absl::StatusOr<IngestTicket>> result_ ABSL_GUARDED_BY(mu_);
  std::thread::id granted_thread_ ABSL_GUARDED_BY(mu_);
};

// Claims `bytes` of an idle enough window: the grant comes inline.
absl::StatusOr<IngestTicket> Hold(IngestWindow& window, uint64_t bytes) {
  GrantBox box;
  window.Acquire(bytes, box.Callback());
  EXPECT_TRUE(box.ready());
  return box.Take();
}

TEST(IngestWindowTest, RequestsThatFitAreGrantedInlineAndFreedOnDestruction) {
  IngestWindow window(100);
  GrantBox a, b;
  window.Acquire(60, a.Callback());
  ASSERT_TRUE(a.ready());  // inline
  EXPECT_EQ(a.granted_thread(), std::this_thread::get_id());
  window.Acquire(40, b.Callback());
  ASSERT_TRUE(b.ready());
  EXPECT_EQ(window.used(), 100u);
  {
    absl::StatusOr<IngestTicket> first = a.Take();
    ASSERT_TRUE(IsOk(first.status()));
    EXPECT_EQ(first->bytes(), 60u);
    IngestTicket moved = *std::move(first);
    EXPECT_EQ(window.used(), 100u);  // moving keeps the claim
  }
  EXPECT_EQ(window.used(), 40u);
  b.Take()->bytes();  // destroyed at once: frees its 40 bytes
  EXPECT_EQ(window.used(), 0u);
  EXPECT_EQ(window.waits(), 0);
}

TEST(IngestWindowTest, AWaitingRequestIsGrantedOnTheWindowsThreadOnceItFits) {
  IngestWindow window(100);
  GrantBox b;
  absl::StatusOr<IngestTicket> held = Hold(window, 70);
  ASSERT_TRUE(IsOk(held.status()));
  window.Acquire(40, b.Callback());
  EXPECT_FALSE(b.ready());
  EXPECT_EQ(window.waiting(), 1);
  EXPECT_EQ(window.waits(), 1);
  *held = IngestTicket();  // frees 70 bytes
  absl::StatusOr<IngestTicket> granted = b.Take();
  ASSERT_TRUE(IsOk(granted.status()));
  EXPECT_EQ(granted->bytes(), 40u);
  EXPECT_NE(b.granted_thread(), std::this_thread::get_id());
  EXPECT_EQ(window.used(), 40u);
  EXPECT_EQ(window.waiting(), 0);
}

TEST(IngestWindowTest, WaitersAreGrantedInArrivalOrderSoALargeOneIsNotStarved) {
  IngestWindow window(100);
  GrantBox large, small;
  absl::StatusOr<IngestTicket> held = Hold(window, 50);
  window.Acquire(80, large.Callback());  // waits: 50 + 80 > 100
  window.Acquire(10, small.Callback());  // would fit, but waits behind the large one
  EXPECT_FALSE(small.ready());
  *held = IngestTicket();
  absl::StatusOr<IngestTicket> first = large.Take();
  ASSERT_TRUE(IsOk(first.status()));
  absl::StatusOr<IngestTicket> second = small.Take();  // 80 + 10 fit together
  ASSERT_TRUE(IsOk(second.status()));
  EXPECT_EQ(window.used(), 90u);
}

TEST(IngestWindowTest, AnUpdateLargerThanTheWindowGoesAloneWhenTheWindowIsEmpty) {
  IngestWindow window(100);
  GrantBox huge, after;
  window.Acquire(500, huge.Callback());
  absl::StatusOr<IngestTicket> alone = huge.Take();  // empty window: granted inline
  ASSERT_TRUE(IsOk(alone.status()));
  EXPECT_EQ(window.used(), 500u);
  window.Acquire(1, after.Callback());
  EXPECT_FALSE(after.ready());  // nothing goes beside it
  *alone = IngestTicket();
  EXPECT_TRUE(IsOk(after.Take().status()));
}

TEST(IngestWindowTest, WaitingAsksThePressureHandlerToFreeBytes) {
  IngestWindow window(100);
  GrantBox waiter;
  // The "pending batch": freed by the handler, as the server's handler reduces batches.
  std::optional<absl::StatusOr<IngestTicket>> pending(Hold(window, 100));
  std::atomic<int> calls = 0;
  window.SetPressureHandler([&] {
    ++calls;
    pending.reset();
  });
  window.Acquire(30, waiter.Callback());
  EXPECT_TRUE(IsOk(waiter.Take().status()));
  EXPECT_EQ(calls.load(), 1);
}

TEST(IngestWindowTest, CloseRefusesWaitersAndLaterRequests) {
  IngestWindow window(10);
  GrantBox waiter, later;
  absl::StatusOr<IngestTicket> held = Hold(window, 10);
  window.Acquire(5, waiter.Callback());
  window.Close();
  EXPECT_TRUE(StatusIs(waiter.Take().status(), absl::StatusCode::kUnavailable, "shutting down"));
  window.Acquire(1, later.Callback());
  EXPECT_TRUE(StatusIs(later.Take().status(), absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_EQ(window.used(), 10u);  // a ticket granted before Close stays valid
}

TEST(IngestWindowTest, AWindowOfZeroBytesAdmitsEverything) {
  IngestWindow window(0);
  GrantBox a, b;
  window.Acquire(uint64_t{1} << 40, a.Callback());
  window.Acquire(uint64_t{1} << 40, b.Callback());
  EXPECT_TRUE(a.ready());
  EXPECT_TRUE(b.ready());
}

TEST(IngestWindowTest, AnUpdateBufferGivesItsPlaceBackWhenFreed) {
  absl::StatusOr<std::shared_ptr<const ReductionSpec>> spec =
      ReductionSpec::Create(ValueType::Tensor(DType::kFloat32, {1000}), {{Intrinsic::kFederatedSum}});
  ASSERT_TRUE(IsOk(spec.status()));
  absl::StatusOr<UpdateBuffer::Layout> layout = UpdateBuffer::Plan(**spec, {0}, 1 << 20);
  ASSERT_TRUE(IsOk(layout.status()));
  EXPECT_EQ(layout->total_bytes(), 4000u);
  IngestWindow window(6000);
  GrantBox place;
  window.Acquire(layout->total_bytes(), place.Callback());
  absl::StatusOr<IngestTicket> ticket = place.Take();
  ASSERT_TRUE(IsOk(ticket.status()));
  {
    absl::StatusOr<UpdateBuffer> buffer =
        UpdateBuffer::Allocate(**spec, *layout, std::nullopt, nullptr, *std::move(ticket));
    ASSERT_TRUE(IsOk(buffer.status()));
    UpdateBuffer moved = *std::move(buffer);
    EXPECT_EQ(window.used(), 4000u);
  }
  EXPECT_EQ(window.used(), 0u);
}

}  // namespace
}  // namespace fedagg::testing
