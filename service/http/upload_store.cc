// The node's HTTP uploads, their leases and their expiry.
#include "service/http/upload_store.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fedagg {

UploadStore::Lease::~Lease() {
  if (store_ != nullptr) store_->Release(key_, upload_.get());
}

UploadStore::UploadStore(ServiceContext& service, Options options)
    : service_(service), options_(options), sweeper_([this] { Sweep(); }) {}

UploadStore::~UploadStore() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  sweeper_.join();
  MutexLock lock(&mu_);
  for (auto& [key, entry] : uploads_) entry.upload->Expire();
  uploads_.clear();
}

absl::StatusOr<UploadStore::Lease> UploadStore::FindOrStart(const v1::UpdateHeader& header,
                                                            const std::string& identity, bool& created) {
  Lease::Key key(header.aggregation_id(), header.client_id());
  std::shared_ptr<HttpUpload> upload;
  {
    MutexLock lock(&mu_);
    auto it = uploads_.find(key);
    if (it != uploads_.end() && !it->second.upload->finished_without_count()) {
      if (!it->second.upload->SameUpdate(header)) {
        const v1::UploadStatus::State state = it->second.upload->state();
        if (state == v1::UploadStatus::COUNTING || state == v1::UploadStatus::COUNTED) {
          return absl::AlreadyExistsError(absl::StrCat("client '", key.second, "' already submitted its update to aggregation '",
                                                       key.first, "'; it is counted once"));
        }
        return absl::AlreadyExistsError(absl::StrCat(
            "client '", key.second, "' has an upload to aggregation '", key.first,
            "' open with another header (weight, field sizes or ack level); delete it (DELETE) to start "
            "another"));
      }
      ++it->second.leases;
      it->second.last_used = absl::Now();
      created = false;
      return Lease(this, std::move(key), it->second.upload);
    }
    if (it == uploads_.end() && uploads_.size() >= options_.max_uploads) {
      return absl::ResourceExhaustedError(absl::StrCat("this node holds ", uploads_.size(),
                                                       " HTTP uploads, its most; retry later or elsewhere"));
    }
    StreamLimiter::Slot slot;
    if (service_.stream_limiter != nullptr) {
      absl::StatusOr<StreamLimiter::Slot> acquired = service_.stream_limiter->Acquire(identity);
      if (!acquired.ok()) {
        service_.metrics.streams_refused.WithLabels({"identity_limit"}).Increment();
        return acquired.status();
      }
      slot = *std::move(acquired);
    }
    upload = std::make_shared<HttpUpload>(service_, header, std::move(slot));
    uploads_[key] = Entry{upload, 1, absl::Now()};
  }
  created = true;
  upload->Start();
  return Lease(this, std::move(key), std::move(upload));
}

absl::StatusOr<UploadStore::Lease> UploadStore::Find(const std::string& aggregation_id,
                                                     const std::string& client_id) {
  Lease::Key key(aggregation_id, client_id);
  MutexLock lock(&mu_);
  auto it = uploads_.find(key);
  if (it == uploads_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "no upload of client '", client_id, "' to aggregation '", aggregation_id,
        "' on this node (never started, expired after the idle timeout, or started on another node); start it "
        "(POST) and write it from offset 0"));
  }
  ++it->second.leases;
  it->second.last_used = absl::Now();
  return Lease(this, std::move(key), it->second.upload);
}

size_t UploadStore::size() const {
  MutexLock lock(&mu_);
  return uploads_.size();
}

void UploadStore::Release(const Lease::Key& key, const HttpUpload* upload) {
  MutexLock lock(&mu_);
  auto it = uploads_.find(key);
  if (it == uploads_.end() || it->second.upload.get() != upload) return;  // replaced meanwhile
  --it->second.leases;
  it->second.last_used = absl::Now();
}

void UploadStore::Sweep() {
  const absl::Duration period =
      std::clamp(options_.idle_timeout / 4, absl::Milliseconds(10), absl::Seconds(1));
  MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; }, period)) {
    const absl::Time now = absl::Now();
    for (auto it = uploads_.begin(); it != uploads_.end();) {
      Entry& entry = it->second;
      const v1::UploadStatus::State state = entry.upload->state();
      if (entry.leases > 0 || state == v1::UploadStatus::COUNTING || now - entry.last_used < options_.idle_timeout) {
        ++it;
        continue;
      }
      entry.upload->Expire();  // WAITING or OPEN: discarded; answered ones only forgotten
      it = uploads_.erase(it);
    }
  }
}

}  // namespace fedagg
