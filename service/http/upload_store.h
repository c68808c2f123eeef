// UploadStore: a node's resumable uploads of the HTTP path, by (aggregation id, client
// id), and their expiry. A request leases the upload it works on; an upload that no
// request leased for the idle timeout is discarded when WAITING or OPEN (its memory, window
// place and client id freed), and forgotten when its answer (COUNTED, FAILED) or abort is
// that old. A sweeper thread of the store's does this.
#ifndef FEDAGG_SERVICE_HTTP_UPLOAD_STORE_H_
#define FEDAGG_SERVICE_HTTP_UPLOAD_STORE_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/core/mutex.h"
#include "service/http/http_upload.h"
#include "service/rpc/service_context.h"

namespace fedagg {

class UploadStore {
 public:
  struct Options {
    absl::Duration idle_timeout = absl::Minutes(5);
    // Uploads held at once, whatever their state: beyond it a new one is refused.
    size_t max_uploads = 100000;
  };
  // An upload in use by one request: not expired meanwhile.
  class Lease {
   public:
    Lease(Lease&& other) noexcept : store_(std::exchange(other.store_, nullptr)), key_(std::move(other.key_)),
                                     upload_(std::move(other.upload_)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    HttpUpload* operator->() const { return upload_.get(); }

   private:
    friend class UploadStore;
    using Key = std::pair<std::string, std::string>;
    Lease(UploadStore* store, Key key, std::shared_ptr<HttpUpload> upload)
        : store_(store), key_(std::move(key)), upload_(std::move(upload)) {}
    UploadStore* store_;
    Key key_;
    std::shared_ptr<HttpUpload> upload_;
  };

  UploadStore(ServiceContext& service, Options options);
  ~UploadStore();  // stops the sweeper; uploads not counted are discarded

  // The upload of the header's (aggregation, client), or a new one started (WAITING)
  // for `identity` when there is none or the last one ended without a count (FAILED,
  // ABORTED). ALREADY_EXISTS when an upload of the pair asks for another update;
  // RESOURCE_EXHAUSTED beyond max_uploads or the identity's stream slots. `created` says
  // which.
  absl::StatusOr<Lease> FindOrStart(const v1::UpdateHeader& header, const std::string& identity, bool& created);
  // NOT_FOUND when the pair has no upload (never started, expired, or held by another node).
  absl::StatusOr<Lease> Find(const std::string& aggregation_id, const std::string& client_id);
  // Uploads held (every state).
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<HttpUpload> upload;
    int leases = 0;
    absl::Time last_used;
  };
  void Release(const Lease::Key& key, const HttpUpload* upload);
  void Sweep();

  ServiceContext& service_;
  const Options options_;
  mutable Mutex mu_;
  std::map<Lease::Key, Entry> uploads_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sweeper_;
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_HTTP_UPLOAD_STORE_H_
