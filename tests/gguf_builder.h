// GGUF bytes built by hand for the tests: every field as a test sets it, so that a file the reader must refuse can
// be written as easily as a valid one; and a real file read back into a builder, to be edited.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "plainllama/io/gguf.h"

namespace plainllama::test {

// A file of ../shared/models/gguf (llama.cpp's own GGUF files).
inline std::filesystem::path shared_gguf(const std::string& name) {
    return std::filesystem::path(PLAINLLAMA_SHARED_DIR) / "models/gguf" / name;
}

struct GgufBuilder {
    struct Kv {
        std::string key;
        uint32_t type;      // GgufType
        std::string value;  // encoded (for an array: element type, count, elements)
    };
    struct Tensor {
        std::string name;
        std::vector<uint64_t> ne;
        uint32_t type;
        std::string data;
        uint64_t offset = ~uint64_t(0);  // in the data section; default: after the previous one, aligned
        uint64_t size = 0;               // bytes placed when `data` is empty (a header_only file's)
        bool written = true;             // false: its info says `offset`, but no data is written there
    };
    uint32_t version = 3;
    uint64_t alignment = 32;  // where tensors are placed (a general.alignment key is the test's to add)
    std::vector<Kv> kvs;
    std::vector<Tensor> tensors;
    uint64_t claimed_kvs = ~uint64_t(0), claimed_tensors = ~uint64_t(0);  // counts written, when not the real ones

    template <class T>
    static std::string raw(T v) {
        std::string s(sizeof(T), '\0');
        std::memcpy(s.data(), &v, sizeof(T));
        return s;
    }
    static std::string str(const std::string& s) { return raw<uint64_t>(s.size()) + s; }

    GgufBuilder& add(const std::string& key, GgufType t, const std::string& encoded) {
        kvs.push_back({key, uint32_t(t), encoded});
        return *this;
    }
    GgufBuilder& u32(const std::string& k, uint32_t v) { return add(k, GgufType::u32, raw(v)); }
    GgufBuilder& f32(const std::string& k, float v) { return add(k, GgufType::f32, raw(v)); }
    GgufBuilder& boolean(const std::string& k, bool v) { return add(k, GgufType::boolean, raw<uint8_t>(v)); }
    GgufBuilder& string(const std::string& k, const std::string& v) { return add(k, GgufType::string, str(v)); }
    GgufBuilder& strings(const std::string& k, const std::vector<std::string>& v) {
        std::string e = raw(uint32_t(GgufType::string)) + raw<uint64_t>(v.size());
        for (const auto& s : v) e += str(s);
        return add(k, GgufType::array, e);
    }
    template <class T>
    GgufBuilder& array(const std::string& k, GgufType elem, const std::vector<T>& v) {
        std::string e = raw(uint32_t(elem)) + raw<uint64_t>(v.size());
        for (const T& x : v) e += raw(x);
        return add(k, GgufType::array, e);
    }
    // Removes key k (true when it was there); sets a value by replacing the entry in place.
    bool remove(const std::string& k) {
        for (size_t i = 0; i < kvs.size(); ++i)
            if (kvs[i].key == k) {
                kvs.erase(kvs.begin() + long(i));
                return true;
            }
        return false;
    }
    Kv* find(const std::string& k) {
        for (Kv& kv : kvs)
            if (kv.key == k) return &kv;
        return nullptr;
    }
    Tensor* tensor(const std::string& name) {
        for (Tensor& t : tensors)
            if (t.name == name) return &t;
        return nullptr;
    }
    GgufBuilder& add_tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::string data) {
        tensors.push_back({name, std::move(ne), type, std::move(data)});
        return *this;
    }

    // The file; with header_only, up to the data section (whose size data_bytes() gives: a test can extend the file
    // sparsely).
    std::string bytes(bool header_only = false) const {
        std::string h = "GGUF" + raw(version) +
                        raw<uint64_t>(claimed_tensors != ~uint64_t(0) ? claimed_tensors : tensors.size()) +
                        raw<uint64_t>(claimed_kvs != ~uint64_t(0) ? claimed_kvs : kvs.size());
        for (const Kv& kv : kvs) h += str(kv.key) + raw(kv.type) + kv.value;
        std::vector<uint64_t> offsets;
        uint64_t next = 0;
        for (const Tensor& t : tensors) {
            const uint64_t off = t.offset != ~uint64_t(0) ? t.offset : next;
            offsets.push_back(off);
            if (t.written)
                next = (off + std::max<uint64_t>(t.data.size(), t.size) + alignment - 1) / alignment * alignment;
            h += str(t.name) + raw(uint32_t(t.ne.size()));
            for (uint64_t d : t.ne) h += raw(d);
            h += raw(t.type) + raw(off);
        }
        if (tensors.empty()) return h;
        h.append((alignment - h.size() % alignment) % alignment, '\0');
        if (header_only) return h;
        std::string data;
        for (size_t i = 0; i < tensors.size(); ++i) {
            if (!tensors[i].written) continue;
            if (data.size() < offsets[i] + tensors[i].data.size()) data.resize(offsets[i] + tensors[i].data.size());
            std::memcpy(&data[offsets[i]], tensors[i].data.data(), tensors[i].data.size());
        }
        return h + data;
    }

    // A file's keys and tensors (its data copied), to be edited and written again.
    static GgufBuilder from(const GgufFile& f) {
        GgufBuilder b;
        b.version = f.version();
        for (const auto& [key, v] : f.metadata()) {
            std::string e;
            auto scalar_size = [](GgufType t) -> size_t {
                switch (t) {
                    case GgufType::u8:
                    case GgufType::i8:
                    case GgufType::boolean:
                        return 1;
                    case GgufType::u16:
                    case GgufType::i16:
                        return 2;
                    case GgufType::u32:
                    case GgufType::i32:
                    case GgufType::f32:
                        return 4;
                    default:
                        return 8;
                }
            };
            if (v.is_array()) e = raw(uint32_t(v.elem)) + raw<uint64_t>(v.count);
            if (v.elem == GgufType::string)
                for (std::string_view s : v.strings) e += str(std::string(s));
            else
                e.append(reinterpret_cast<const char*>(v.data), size_t(v.count) * scalar_size(v.elem));
            b.kvs.push_back({key, uint32_t(v.type), e});
        }
        for (const GgufTensor& t : f.tensors())
            b.tensors.push_back({t.name, std::vector<uint64_t>(t.ne.begin(), t.ne.end()), t.type->id,
                                 std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
        return b;
    }
};

}  // namespace plainllama::test
