// StagingRingStats: what a device backend's staging rings (portable/staging_ring.h, one
// per device) report when /metrics is scraped: slots in use, host memory held, bytes
// staged, and how long copies and reductions took. A backend's
// AccumulatorFactory::staging_rings() returns them; backends that reduce straight from
// the received updates (cpu) return none. Thread-safe and quick to read.
#ifndef FEDAGG_SERVICE_CORE_STAGING_MONITOR_H_
#define FEDAGG_SERVICE_CORE_STAGING_MONITOR_H_

#include <cstdint>

namespace fedagg {

class Histogram;  // monitoring/metrics_registry.h

class StagingRingStats {
 public:
  virtual ~StagingRingStats() = default;
  virtual int device() const = 0;
  virtual int slots() const = 0;
  virtual uint64_t slot_bytes() const = 0;
  virtual int slots_in_use() const = 0;       // packed, copying or reducing
  virtual uint64_t host_bytes() const = 0;    // host memory of the allocated slots
  virtual uint64_t bytes_staged() const = 0;  // copied to the device since start
  virtual uint64_t bytes_packed() const = 0;  // of those, packed into a slot on the host first
  virtual const Histogram& copy_seconds() const = 0;    // each slot's host-to-device copy
  virtual const Histogram& reduce_seconds() const = 0;  // each slot's reduction on the device
};

}  // namespace fedagg

#endif  // FEDAGG_SERVICE_CORE_STAGING_MONITOR_H_
