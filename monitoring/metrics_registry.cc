// MetricsRegistry: metric families and the Prometheus text exposition format.
#include "monitoring/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace fedagg {
namespace {

// A sample value as Prometheus writes it: integers without a fraction, +Inf/-Inf/NaN spelled out.
std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// `{a="x",b="y"}` (plus an extra label, for `le`), or "" without labels.
std::string Labels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                   const std::string& extra_name = "", const std::string& extra_value = "") {
  std::vector<std::string> parts;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    parts.push_back(absl::StrCat(names[i], "=\"", EscapeLabelValue(values[i]), "\""));
  }
  if (!extra_name.empty()) parts.push_back(absl::StrCat(extra_name, "=\"", extra_value, "\""));
  if (parts.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < parts.size(); ++i) absl::StrAppend(&out, i ? "," : "", parts[i]);
  return out + "}";
}

// The _bucket, _sum and _count lines of one histogram series.
void AppendHistogram(std::string& out, const std::string& name, const std::vector<std::string>& names,
                     const std::vector<std::string>& values, const Histogram& histogram) {
  const Histogram::Snapshot s = histogram.Read();
  for (size_t b = 0; b < s.cumulative.size(); ++b) {
    const std::string le = b < histogram.bounds().size() ? FormatValue(histogram.bounds()[b]) : "+Inf";
    absl::StrAppend(&out, name, "_bucket", Labels(names, values, "le", le), " ", s.cumulative[b], "\n");
  }
  absl::StrAppend(&out, name, "_sum", Labels(names, values), " ", FormatValue(s.sum), "\n");
  absl::StrAppend(&out, name, "_count", Labels(names, values), " ", s.count, "\n");
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  MutexLock lock(&mu_);
  ++counts_[bucket];
  sum_ += value;
}

Histogram::Snapshot Histogram::Read() const {
  MutexLock lock(&mu_);
  Snapshot snapshot;
  uint64_t running = 0;
  for (uint64_t count : counts_) {
    running += count;
    snapshot.cumulative.push_back(running);
  }
  snapshot.sum = sum_;
  snapshot.count = running;
  return snapshot;
}

MetricsRegistry::Entry& MetricsRegistry::Add(const std::string& name, const std::string& help,
                                             const std::string& type) {
  entries_.push_back(std::make_unique<Entry>());
  Entry& entry = *entries_.back();
  entry.name = name;
  entry.help = help;
  entry.type = type;
  return entry;
}

Family<Counter>& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                             std::vector<std::string> label_names) {
  MutexLock lock(&mu_);
  Entry& entry = Add(name, help, "counter");
  entry.counters = std::make_unique<Family<Counter>>(std::move(label_names),
                                                     [] { return std::make_unique<Counter>(); });
  return *entry.counters;
}

Family<Gauge>& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names) {
  MutexLock lock(&mu_);
  Entry& entry = Add(name, help, "gauge");
  entry.gauges = std::make_unique<Family<Gauge>>(std::move(label_names),
                                                 [] { return std::make_unique<Gauge>(); });
  return *entry.gauges;
}

Family<Histogram>& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                                 std::vector<double> bounds,
                                                 std::vector<std::string> label_names) {
  MutexLock lock(&mu_);
  Entry& entry = Add(name, help, "histogram");
  std::sort(bounds.begin(), bounds.end());
  entry.histograms = std::make_unique<Family<Histogram>>(
      std::move(label_names), [bounds] { return std::make_unique<Histogram>(bounds); });
  return *entry.histograms;
}

void MetricsRegistry::AddSampled(const std::string& name, const std::string& help, const std::string& type,
                                 std::vector<std::string> label_names, std::function<GaugeSamples()> read) {
  MutexLock lock(&mu_);
  Entry& entry = Add(name, help, type);
  entry.callback_labels = std::move(label_names);
  entry.callback = std::move(read);
}

void MetricsRegistry::AddGaugeCallback(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names,
                                       std::function<GaugeSamples()> read) {
  AddSampled(name, help, "gauge", std::move(label_names), std::move(read));
}

void MetricsRegistry::AddCounterCallback(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names,
                                         std::function<GaugeSamples()> read) {
  AddSampled(name, help, "counter", std::move(label_names), std::move(read));
}

void MetricsRegistry::AddHistogramCallback(const std::string& name, const std::string& help,
                                           std::vector<std::string> label_names,
                                           std::function<HistogramViews()> list) {
  MutexLock lock(&mu_);
  Entry& entry = Add(name, help, "histogram");
  entry.callback_labels = std::move(label_names);
  entry.histogram_callback = std::move(list);
}

std::string MetricsRegistry::Exposition() const {
  MutexLock lock(&mu_);
  std::string out;
  for (const auto& entry_ptr : entries_) {
    const Entry& e = *entry_ptr;
    absl::StrAppend(&out, "# HELP ", e.name, " ", EscapeHelp(e.help), "\n# TYPE ", e.name, " ", e.type, "\n");
    if (e.counters) {
      e.counters->ForEach([&](const std::vector<std::string>& values, const Counter& c) {
        absl::StrAppend(&out, e.name, Labels(e.counters->label_names(), values), " ", FormatValue(c.value()), "\n");
      });
    } else if (e.gauges) {
      e.gauges->ForEach([&](const std::vector<std::string>& values, const Gauge& g) {
        absl::StrAppend(&out, e.name, Labels(e.gauges->label_names(), values), " ", FormatValue(g.value()), "\n");
      });
    } else if (e.histograms) {
      e.histograms->ForEach([&](const std::vector<std::string>& values, const Histogram& h) {
        AppendHistogram(out, e.name, e.histograms->label_names(), values, h);
      });
    } else if (e.histogram_callback) {
      for (const auto& [values, histogram] : e.histogram_callback()) {
        AppendHistogram(out, e.name, e.callback_labels, values, *histogram);
      }
    } else if (e.callback) {
      for (const auto& [values, value] : e.callback()) {
        absl::StrAppend(&out, e.name, Labels(e.callback_labels, values), " ", FormatValue(value), "\n");
      }
    }
  }
  return out;
}

}  // namespace fedagg
