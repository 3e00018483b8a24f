#include "plainllama/io/gguf_writer.h"

#include <algorithm>
#include <cstring>

#include "plainllama/io/output.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

constexpr uint64_t kAlignment = 32;  // GGUF's default (no general.alignment key)

template <class T>
void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}
void put_string(std::string& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out += s;
}

}  // namespace

void GgufWriter::key(const std::string& k, GgufType t) {
    PL_CHECK(std::find(keys_.begin(), keys_.end(), k) == keys_.end());
    keys_.push_back(k);
    ++n_kv_;
    put_string(header_kv_, k);
    put<uint32_t>(header_kv_, uint32_t(t));
}

void GgufWriter::add_u32(const std::string& k, uint32_t v) {
    key(k, GgufType::u32);
    put(header_kv_, v);
}
void GgufWriter::add_i32(const std::string& k, int32_t v) {
    key(k, GgufType::i32);
    put(header_kv_, v);
}
void GgufWriter::add_f32(const std::string& k, float v) {
    key(k, GgufType::f32);
    put(header_kv_, v);
}
void GgufWriter::add_bool(const std::string& k, bool v) {
    key(k, GgufType::boolean);
    put<uint8_t>(header_kv_, v ? 1 : 0);
}
void GgufWriter::add_string(const std::string& k, const std::string& v) {
    key(k, GgufType::string);
    put_string(header_kv_, v);
}
void GgufWriter::add_strings(const std::string& k, const std::vector<std::string>& v) {
    key(k, GgufType::array);
    put<uint32_t>(header_kv_, uint32_t(GgufType::string));
    put<uint64_t>(header_kv_, v.size());
    for (const std::string& s : v) put_string(header_kv_, s);
}
void GgufWriter::add_f32s(const std::string& k, const std::vector<float>& v) {
    key(k, GgufType::array);
    put<uint32_t>(header_kv_, uint32_t(GgufType::f32));
    put<uint64_t>(header_kv_, v.size());
    for (float x : v) put(header_kv_, x);
}
void GgufWriter::add_i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, GgufType::array);
    put<uint32_t>(header_kv_, uint32_t(GgufType::i32));
    put<uint64_t>(header_kv_, v.size());
    for (int32_t x : v) put(header_kv_, x);
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type,
                            std::function<void(const Sink&)> write) {
    const GgmlType* t = ggml_type(type);
    PL_CHECK(t && !ne.empty() && ne[0] % t->block == 0);
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    tensors_.push_back({name, ne, type, size_t(n / t->block) * t->block_bytes, std::move(write)});
}

void GgufWriter::write(const std::filesystem::path& path) const {
    std::string header = "GGUF";
    put<uint32_t>(header, 3);
    put<uint64_t>(header, tensors_.size());
    put<uint64_t>(header, n_kv_);
    header += header_kv_;
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (const Tensor& t : tensors_) {
        put_string(header, t.name);
        put<uint32_t>(header, uint32_t(t.ne.size()));
        for (int64_t d : t.ne) put<uint64_t>(header, uint64_t(d));
        put<uint32_t>(header, t.type);
        put<uint64_t>(header, offset);
        offsets.push_back(offset);
        offset = (offset + t.nbytes + kAlignment - 1) / kAlignment * kAlignment;
    }
    header.append((kAlignment - header.size() % kAlignment) % kAlignment, '\0');

    // The bytes through a buffer: the tensors' callbacks write a row at a time.
    PartialFile out(path);
    std::string buf;
    constexpr size_t kBuffer = size_t(1) << 20;
    uint64_t written = 0;
    const Sink sink = [&](const void* p, size_t n) {
        if (buf.size() + n > kBuffer) {
            out.write(buf);
            buf.clear();
        }
        if (n >= kBuffer)
            out.write(p, n);
        else
            buf.append(static_cast<const char*>(p), n);
        written += n;
    };
    sink(header.data(), header.size());
    const std::string pad(kAlignment, '\0');
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const uint64_t start = written;
        tensors_[i].write(sink);
        PL_CHECK(written - start == tensors_[i].nbytes);
        sink(pad.data(), size_t((kAlignment - written % kAlignment) % kAlignment));
    }
    out.write(buf);
    out.commit();
}

}  // namespace plainllama
