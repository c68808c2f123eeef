// MetricsRegistry: counters, gauges and histograms with labels, rendered in the
// Prometheus text exposition format (HELP and TYPE lines, escaped label values,
// cumulative `_bucket{le=...}` series ending in `+Inf`, `_sum` and `_count`).
// Register metric families once at start-up; updating a metric is lock-free for counters
// and gauges and takes a short lock for histograms. Callback gauges are read at scrape time.
#ifndef FEDAGG_MONITORING_METRICS_REGISTRY_H_
#define FEDAGG_MONITORING_METRICS_REGISTRY_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "service/core/mutex.h"

namespace fedagg {

// A double that many threads add to without a lock.
class AtomicDouble {
 public:
  void Add(double delta) {
    double current = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
    }
  }
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  double Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Counter {
 public:
  void Increment(double by = 1) { value_.Add(by); }
  double value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Gauge {
 public:
  void Set(double value) { value_.Set(value); }
  void Add(double delta) { value_.Add(delta); }
  double value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Cumulative counts per bound (the last entry is +Inf), the sum and the count.
  struct Snapshot {
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, last = above every bound
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

// One metric name with its label names; each distinct tuple of label values is a series.
template <typename Metric>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::function<std::unique_ptr<Metric>()> make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}
  // The series for these label values (as many as label names), created on first use.
  Metric& WithLabels(const std::vector<std::string>& values) {
    MutexLock lock(&mu_);
    std::unique_ptr<Metric>& metric = series_[values];
    if (metric == nullptr) metric = make_();
    return *metric;
  }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Calls fn(label values, metric) for every series, in label order.
  void ForEach(const std::function<void(const std::vector<std::string>&, const Metric&)>& fn) const {
    MutexLock lock(&mu_);
    for (const auto& [values, metric] : series_) fn(values, *metric);
  }

 private:
  const std::vector<std::string> label_names_;
  const std::function<std::unique_ptr<Metric>()> make_;
  mutable Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  // Series of a callback gauge: label values and the value.
  using GaugeSamples = std::vector<std::pair<std::vector<std::string>, double>>;

  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<double> bounds, std::vector<std::string> label_names = {});
  // A gauge whose series are computed when scraped.
  void AddGaugeCallback(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names, std::function<GaugeSamples()> read);
  // A counter whose series are read when scraped (a monotonic total kept elsewhere).
  void AddCounterCallback(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names, std::function<GaugeSamples()> read);
  // Histograms owned elsewhere (they must outlive the registry), listed when scraped.
  using HistogramViews = std::vector<std::pair<std::vector<std::string>, const Histogram*>>;
  void AddHistogramCallback(const std::string& name, const std::string& help,
                            std::vector<std::string> label_names, std::function<HistogramViews()> list);

  // Every metric in the text exposition format (version 0.0.4).
  std::string Exposition() const;

 private:
  struct Entry {
    std::string name;
    std::string help;
    std::string type;  // counter, gauge, histogram
    std::unique_ptr<Family<Counter>> counters;
    std::unique_ptr<Family<Gauge>> gauges;
    std::unique_ptr<Family<Histogram>> histograms;
    std::vector<std::string> callback_labels;
    std::function<GaugeSamples()> callback;
    std::function<HistogramViews()> histogram_callback;
  };
  Entry& Add(const std::string& name, const std::string& help, const std::string& type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A family of `type` whose series `read` computes at scrape time.
  void AddSampled(const std::string& name, const std::string& help, const std::string& type,
                  std::vector<std::string> label_names, std::function<GaugeSamples()> read);

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedagg

#endif  // FEDAGG_MONITORING_METRICS_REGISTRY_H_
