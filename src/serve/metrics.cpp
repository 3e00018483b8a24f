#include "plainllama/serve/metrics.h"

#include <charconv>
#include <cmath>

namespace plainllama {

namespace {

// A number as Prometheus reads it: the shortest text that reads back as the same double ("0.025", "3", "1e+20");
// +Inf for infinity.
std::string number(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (std::isnan(v)) return "NaN";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

// A label value: backslash, double quote and line feed escaped.
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, double v) { out += name + " " + number(v) + "\n"; }

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++count_;
}

void Histogram::write(std::string& out, const std::string& name) const {
    uint64_t below = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
        below += counts_[i];
        const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
        out += name + "_bucket{le=\"" + number(le) + "\"} " + std::to_string(below) + "\n";
    }
    sample(out, name + "_sum", sum_);
    out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      duration_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}) {}

void Metrics::request(const std::string& endpoint, int status) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[{endpoint, status}];
}

void Metrics::completion(const JobOutput& out, double duration_s) {
    std::lock_guard<std::mutex> lock(mutex_);
    prompt_cached_ += uint64_t(out.cached_tokens);
    // a job ended before its prompt was whole (cancelled) evaluated part of it only: counted when whole
    if (out.completion_tokens > 0 || out.finish == Finish::stop || out.finish == Finish::length)
        prompt_evaluated_ += uint64_t(out.prompt_tokens - out.cached_tokens);
    generated_ += uint64_t(out.completion_tokens);
    if (out.completion_tokens > 0) ttft_.observe(out.queued_s + out.prompt_s);  // the first token ends the prompt
    duration_.observe(duration_s);
}

std::string Metrics::render(const MetricsState& st) const {
    std::string out;
    family(out, "plainllama_build_info", "gauge", "The server's version (the value is 1).");
    out += "plainllama_build_info{version=\"" + label(st.version) + "\"} 1\n";
    std::lock_guard<std::mutex> lock(mutex_);
    family(out, "plainllama_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (const auto& [key, n] : requests_)
        out += "plainllama_requests_total{endpoint=\"" + label(key.first) + "\",status=\"" +
               std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    family(out, "plainllama_requests_in_flight", "gauge", "HTTP requests received and not yet answered whole.");
    sample(out, "plainllama_requests_in_flight", st.in_flight);
    family(out, "plainllama_prompt_tokens_evaluated_total", "counter",
           "Prompt tokens evaluated by the model (those not found in a slot's cache).");
    sample(out, "plainllama_prompt_tokens_evaluated_total", double(prompt_evaluated_));
    family(out, "plainllama_prompt_tokens_cached_total", "counter", "Prompt tokens found in a slot's cache.");
    sample(out, "plainllama_prompt_tokens_cached_total", double(prompt_cached_));
    family(out, "plainllama_generated_tokens_total", "counter", "Completion tokens generated.");
    sample(out, "plainllama_generated_tokens_total", double(generated_));
    family(out, "plainllama_time_to_first_token_seconds", "histogram",
           "From a completion's admission to the queue to its first token.");
    ttft_.write(out, "plainllama_time_to_first_token_seconds");
    family(out, "plainllama_request_duration_seconds", "histogram",
           "Completion requests given to the engine, from arrival to the last byte of the response.");
    duration_.write(out, "plainllama_request_duration_seconds");
    if (!st.engine) return out;  // loading: nothing more is known
    const EngineStats& e = *st.engine;
    family(out, "plainllama_decode_tokens_total", "counter", "Tokens sampled in batched decode steps.");
    sample(out, "plainllama_decode_tokens_total", double(e.decode_tokens));
    family(out, "plainllama_decode_seconds_total", "counter", "Time spent in batched decode steps.");
    sample(out, "plainllama_decode_seconds_total", e.decode_seconds);
    family(out, "plainllama_decode_tokens_per_second", "gauge",
           "Tokens per second of the batched decode steps, over the last second or so of decoding.");
    sample(out, "plainllama_decode_tokens_per_second", e.decode_tokens_per_s);
    family(out, "plainllama_slots_busy", "gauge", "Slots holding a request (evaluating its prompt or generating).");
    sample(out, "plainllama_slots_busy", e.busy);
    family(out, "plainllama_slots_total", "gauge", "Slots (--parallel).");
    sample(out, "plainllama_slots_total", e.slots);
    family(out, "plainllama_queue_depth", "gauge", "Requests waiting for a slot.");
    sample(out, "plainllama_queue_depth", e.queued);
    family(out, "plainllama_kv_cache_positions_used", "gauge",
           "KV cache positions filled, over every slot (a free slot keeps its last conversation).");
    sample(out, "plainllama_kv_cache_positions_used", double(e.kv_used));
    family(out, "plainllama_kv_cache_positions_total", "gauge", "KV cache positions, over every slot.");
    sample(out, "plainllama_kv_cache_positions_total", double(e.kv_total));
    family(out, "plainllama_model_load_seconds", "gauge", "Time the model took to load.");
    sample(out, "plainllama_model_load_seconds", st.load_seconds);
    return out;
}

}  // namespace plainllama
