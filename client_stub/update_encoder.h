// Encodes one update as the messages of the fedagg.v1 protocol: an UpdateHeader (with
// every field's nnz), Chunks of at most `chunk_bytes` per section in wire order (field 0
// indices, field 0 values, field 1 ...), and an UpdateEnd with the CRC-32C of it all.
// Used by the Contribute stream and the Submit path alike.
#ifndef FEDAGG_CLIENT_STUB_UPDATE_ENCODER_H_
#define FEDAGG_CLIENT_STUB_UPDATE_ENCODER_H_

#include <functional>
#include <string>

#include "fedagg/v1/aggregation.pb.h"
#include "service/core/field_value.h"

namespace fedagg {

struct EncodedUpdateSink {
  std::function<bool(const v1::UpdateHeader&)> header;
  std::function<bool(const v1::Chunk&)> chunk;
  std::function<bool(const v1::UpdateEnd&)> end;
};

// Emits the update; stops early (returning false) when a sink returns false.
bool EncodeUpdate(const std::string& aggregation_id, const std::string& client_id,
                  const UpdateView& update, size_t chunk_bytes, const EncodedUpdateSink& sink);

}  // namespace fedagg

#endif  // FEDAGG_CLIENT_STUB_UPDATE_ENCODER_H_
