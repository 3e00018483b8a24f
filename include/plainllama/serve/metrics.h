// The server's figures for GET /metrics, written in Prometheus' text exposition format (version 0.0.4): counters of
// requests (by endpoint and status) and tokens, histograms of the time to first token and of completion requests'
// durations, and the engine's state at the time of the scrape (slots, queue, KV cache, decode speed). Thread-safe:
// the listener's loop and the completion threads count, a scrape reads. Knows nothing of HTTP.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "plainllama/serve/engine.h"

namespace plainllama {

// Counts of observations at or below each upper bound (cumulative, as Prometheus has them), their sum and count.
class Histogram {
   public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double v);
    // The `name`_bucket{le=...}, `name`_sum and `name`_count lines.
    void write(std::string& out, const std::string& name) const;

   private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // [bounds_.size() + 1]: the last is +Inf
    double sum_ = 0;
    uint64_t count_ = 0;
};

// What the exposition shows besides the counters.
struct MetricsState {
    std::string version;                  // plainllama_build_info{version=...}
    const EngineStats* engine = nullptr;  // null while the model loads
    double load_seconds = 0;              // the model's load time (with an engine)
    int in_flight = 0;                    // requests received whose response is not sent whole
};

class Metrics {
   public:
    Metrics();
    // A request answered: `endpoint` is its route ("/v1/chat/completions") or "other".
    void request(const std::string& endpoint, int status);
    // A completion's job over: its tokens, its time to first token (when it produced one), and the request's time
    // from its arrival to its last byte queued.
    void completion(const JobOutput& out, double duration_s);
    std::string render(const MetricsState& state) const;

   private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    uint64_t prompt_evaluated_ = 0, prompt_cached_ = 0, generated_ = 0;
    Histogram ttft_, duration_;
};

}  // namespace plainllama
