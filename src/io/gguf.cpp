#include "plainllama/io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace {

// Tensor types ggml defines, with their blocks (ggml-common.h's block structs).
constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36},    {41, "Q1_0", 128, 18},
};

constexpr size_t kGgufMaxDims = 4;   // ggml's GGML_MAX_DIMS
constexpr size_t kGgufMaxName = 63;  // ggml's GGML_MAX_NAME less the NUL
constexpr uint64_t kGgufMaxAlignment = uint64_t(1) << 30;

size_t scalar_size(GgufType t) {
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
        case GgufType::u64:
        case GgufType::i64:
        case GgufType::f64:
            return 8;
        case GgufType::string:
        case GgufType::array:
            return 0;
    }
    return 0;
}

template <class T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// A cursor over the header: every read checked against the end.
struct Reader {
    const uint8_t* p;
    size_t size, pos = 0;
    const std::string& source;

    size_t left() const { return size - pos; }
    [[noreturn]] void truncated(const std::string& what) const {
        throw Error(source + ": truncated: " + what + " at byte " + std::to_string(pos) + " runs past the end of the " +
                    std::to_string(size) + "-byte file");
    }
    template <class T>
    T get(const std::string& what) {
        if (left() < sizeof(T)) truncated(what);
        const T v = load<T>(p + pos);
        pos += sizeof(T);
        return v;
    }
    std::string_view string(const std::string& what) {
        const uint64_t n = get<uint64_t>(what + "'s length");
        if (n > left())
            throw Error(source + ": " + what + " claims " + std::to_string(n) + " bytes at byte " +
                        std::to_string(pos) + " but only " + std::to_string(left()) + " remain in the file");
        const std::string_view s(reinterpret_cast<const char*>(p + pos), size_t(n));
        pos += size_t(n);
        return s;
    }
};

std::string quoted(std::string_view s) {
    std::string t(s.substr(0, 60));
    return "\"" + printable(t) + (s.size() > 60 ? "...\"" : "\"");
}

}  // namespace

const char* gguf_type_name(GgufType t) {
    static const char* const names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    return uint32_t(t) < 13 ? names[uint32_t(t)] : "?";
}

bool GgufValue::is_integer() const {
    switch (elem) {
        case GgufType::u8:
        case GgufType::i8:
        case GgufType::u16:
        case GgufType::i16:
        case GgufType::u32:
        case GgufType::i32:
        case GgufType::u64:
        case GgufType::i64:
            return true;
        default:
            return false;
    }
}

bool GgufValue::is_float() const { return elem == GgufType::f32 || elem == GgufType::f64; }

int64_t GgufValue::integer(uint64_t i) const {
    PL_CHECK(i < count && data);
    const uint8_t* q = data + i * scalar_size(elem);
    switch (elem) {
        case GgufType::u8:
        case GgufType::boolean:
            return *q;
        case GgufType::i8:
            return int8_t(*q);
        case GgufType::u16:
            return load<uint16_t>(q);
        case GgufType::i16:
            return load<int16_t>(q);
        case GgufType::u32:
            return load<uint32_t>(q);
        case GgufType::i32:
            return load<int32_t>(q);
        case GgufType::u64:
            return int64_t(std::min<uint64_t>(load<uint64_t>(q), INT64_MAX));
        case GgufType::i64:
            return load<int64_t>(q);
        case GgufType::f32:
            return int64_t(load<float>(q));  // not called for floats (see number())
        case GgufType::f64:
            return int64_t(load<double>(q));
        default:
            break;
    }
    PL_CHECK(false);
}

double GgufValue::number(uint64_t i) const {
    PL_CHECK(i < count && data);
    const uint8_t* q = data + i * scalar_size(elem);
    if (elem == GgufType::f32) return load<float>(q);
    if (elem == GgufType::f64) return load<double>(q);
    if (elem == GgufType::u64) return double(load<uint64_t>(q));
    return double(integer(i));
}

std::string GgufValue::brief() const {
    if (is_array()) {
        return "an array of " + std::to_string(count) + " " + gguf_type_name(elem) +
               (elem == GgufType::string ? "s" : "");
    }
    if (elem == GgufType::string) return "string " + quoted(strings.at(0));
    if (elem == GgufType::boolean) return std::string("bool ") + (*data ? "true" : "false");
    char buf[64];
    if (is_float())
        std::snprintf(buf, sizeof buf, "%s %.9g", gguf_type_name(elem), number());
    else if (elem == GgufType::u64)
        std::snprintf(buf, sizeof buf, "u64 %llu", (unsigned long long)load<uint64_t>(data));
    else
        std::snprintf(buf, sizeof buf, "%s %lld", gguf_type_name(elem), (long long)integer());
    return buf;
}

const GgmlType* ggml_type(uint32_t id) {
    for (const GgmlType& t : kGgmlTypes)
        if (t.id == id) return &t;
    return nullptr;
}

int64_t GgufTensor::rows() const {
    int64_t n = 1;
    for (size_t i = 1; i < ne.size(); ++i) n *= ne[i];
    return n;
}

std::string GgufTensor::shape_str() const { return plainllama::shape_str(ne); }

GgufFile::GgufFile(const std::filesystem::path& path) : source_(path.string()) {
    file_ = std::make_shared<MappedFile>(path);
    parse(file_->data(), file_->size());
}

GgufFile::GgufFile(const uint8_t* bytes, size_t size, const std::string& source) : source_(source) {
    parse(bytes, size);
}

void GgufFile::fail(const std::string& key, const std::string& what) const {
    throw Error(source_ + ": '" + printable(key) + "' " + what);
}

void GgufFile::parse(const uint8_t* bytes, size_t size) {
    Reader r{bytes, size, 0, source_};
    if (size < 4 || std::memcmp(bytes, "GGUF", 4) != 0)
        throw Error(source_ + ": not a GGUF file (it does not start with \"GGUF\")");
    r.pos = 4;
    version_ = r.get<uint32_t>("the version");
    if (version_ == 1) throw Error(source_ + ": GGUF version 1 is not supported (expected 2 or 3; convert it again)");
    if ((version_ & 0xffffu) == 0 && version_ != 0)
        throw Error(source_ + ": GGUF version " + std::to_string(version_) +
                    " looks byte-swapped: big-endian GGUF is not supported");
    if (version_ != 2 && version_ != 3)
        throw Error(source_ + ": GGUF version " + std::to_string(version_) + " is not supported (expected 2 or 3)");
    const uint64_t n_tensors = r.get<uint64_t>("the tensor count"), n_kv = r.get<uint64_t>("the key count");
    // Each key takes at least 12 bytes (its length and type), each tensor info at least 24: a count the file cannot
    // hold is refused before anything is allocated for it.
    if (n_kv > r.left() / 12)
        throw Error(source_ + ": header claims " + std::to_string(n_kv) + " metadata keys; the " +
                    std::to_string(size) + "-byte file cannot hold them");
    if (n_tensors > r.left() / 24)
        throw Error(source_ + ": header claims " + std::to_string(n_tensors) + " tensors; the " + std::to_string(size) +
                    "-byte file cannot hold them");

    kv_.reserve(size_t(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
        const std::string what = "metadata key " + std::to_string(i);
        const std::string key(r.string(what));
        if (key.empty()) throw Error(source_ + ": " + what + " has an empty name");
        if (key_index_.count(key)) fail(key, "appears twice in the metadata");
        GgufValue v;
        const uint32_t type = r.get<uint32_t>("the type of '" + printable(key) + "'");
        if (type > uint32_t(GgufType::f64)) fail(key, "has an unknown value type " + std::to_string(type));
        v.type = v.elem = GgufType(type);
        if (v.type == GgufType::array) {
            const uint32_t elem = r.get<uint32_t>("the element type of '" + printable(key) + "'");
            if (elem == uint32_t(GgufType::array)) fail(key, "is an array of arrays (not supported by GGUF readers)");
            if (elem > uint32_t(GgufType::f64)) fail(key, "is an array of an unknown type " + std::to_string(elem));
            v.elem = GgufType(elem);
            v.count = r.get<uint64_t>("the length of '" + printable(key) + "'");
        }
        if (v.elem == GgufType::string) {
            if (v.count > r.left() / 8)  // each string is at least its 8-byte length
                fail(key, "claims " + std::to_string(v.count) + " strings; the file cannot hold them");
            v.strings.reserve(size_t(v.count));
            for (uint64_t k = 0; k < v.count; ++k)
                v.strings.push_back(r.string("'" + printable(key) + "'" +
                                             (v.is_array() ? " element " + std::to_string(k) : std::string())));
        } else {
            const size_t es = scalar_size(v.elem);
            if (v.count > r.left() / es)
                fail(key, "claims " + std::to_string(v.count) + " " + gguf_type_name(v.elem) + " values (" +
                              "past the end of the file)");
            v.data = bytes + r.pos;
            r.pos += size_t(v.count) * es;
            if (v.elem == GgufType::boolean)
                for (uint64_t k = 0; k < v.count; ++k)
                    if (v.data[k] > 1) fail(key, "holds a bool that is neither 0 nor 1");
        }
        key_index_.emplace(key, kv_.size());
        kv_.emplace_back(key, std::move(v));
    }
    if (const GgufValue* a = find("general.alignment")) {
        if (a->is_array() || a->elem != GgufType::u32) fail("general.alignment", "must be a u32, found " + a->brief());
        alignment_ = uint64_t(a->integer());
        if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0 || alignment_ > kGgufMaxAlignment)
            fail("general.alignment", "must be a power of 2 (at most 2^30), found " + std::to_string(alignment_));
    }

    tensors_.reserve(size_t(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
        GgufTensor t;
        t.file = source_;
        t.name = std::string(r.string("tensor info " + std::to_string(i) + "'s name"));
        const std::string where = source_ + ": tensor '" + printable(t.name) + "'";
        if (t.name.empty()) throw Error(source_ + ": tensor info " + std::to_string(i) + " has an empty name");
        if (t.name.size() > kGgufMaxName)
            throw Error(where + ": the name is " + std::to_string(t.name.size()) + " bytes (at most " +
                        std::to_string(kGgufMaxName) + ")");
        if (tensor_index_.count(t.name)) throw Error(where + " appears twice");
        const uint32_t n_dims = r.get<uint32_t>("the dimensions of '" + printable(t.name) + "'");
        if (n_dims == 0 || n_dims > kGgufMaxDims)
            throw Error(where + ": " + std::to_string(n_dims) + " dimensions (expected 1 to " +
                        std::to_string(kGgufMaxDims) + ")");
        // No type packs an element in fewer than 1/8 byte: a shape past 8 elements per byte of the file is refused
        // before any product can overflow (the dimensions other than zeros bounded alike, so rows() cannot either).
        const uint64_t limit = uint64_t(size) * 8 + 8;
        uint64_t numel = 1, nonzero = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const uint64_t n = r.get<uint64_t>("the shape of '" + printable(t.name) + "'");
            if (n > uint64_t(INT64_MAX)) throw Error(where + ": dimension " + std::to_string(d) + " is negative");
            t.ne.push_back(int64_t(n));
            if (n != 0 && nonzero > limit / n)
                throw Error(where + ": shape " + t.shape_str() + (d + 1 < n_dims ? "..." : "") +
                            " is larger than the file can hold");
            nonzero *= n == 0 ? 1 : n;
            numel *= n;
        }
        const uint32_t type = r.get<uint32_t>("the type of '" + printable(t.name) + "'");
        t.type = ggml_type(type);
        if (!t.type) throw Error(where + ": unknown tensor type " + std::to_string(type));
        if (t.ne[0] % t.type->block != 0)
            throw Error(where + ": rows of " + std::to_string(t.ne[0]) + " elements are not a multiple of " +
                        t.type->name + "'s block of " + std::to_string(t.type->block));
        const uint64_t blocks = numel / uint64_t(t.type->block);
        if (blocks > uint64_t(size) / t.type->block_bytes)
            throw Error(where + ": shape " + t.shape_str() + " of " + t.type->name + " is larger than the " +
                        std::to_string(size) + "-byte file");
        t.nbytes = size_t(blocks * t.type->block_bytes);
        t.offset = r.get<uint64_t>("the offset of '" + printable(t.name) + "'");
        if (t.offset % alignment_ != 0)
            throw Error(where + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment (" +
                        std::to_string(alignment_) + ")");
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }
    header_bytes_ = r.pos;
    if (tensors_.empty()) return;

    // The data section starts at the next multiple of the alignment; each tensor within it, not overlapping another.
    const uint64_t data_start = (uint64_t(r.pos) + alignment_ - 1) / alignment_ * alignment_;
    if (data_start > size)
        throw Error(source_ + ": truncated: the data section would start at byte " + std::to_string(data_start) +
                    " of the " + std::to_string(size) + "-byte file");
    const uint64_t data_size = size - data_start;
    std::vector<const GgufTensor*> order;
    for (GgufTensor& t : tensors_) {
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            throw Error(source_ + ": tensor '" + printable(t.name) + "' (" + std::to_string(t.nbytes) +
                        " bytes at offset " + std::to_string(t.offset) +
                        " of the data section) runs past the end of the " +
                        "file (truncated?): the data section holds " + std::to_string(data_size) + " bytes");
        t.offset += data_start;
        t.data = bytes + t.offset;
        const size_t es = t.type->block == 1 ? t.type->block_bytes : 1;  // float elements are read in place
        if (reinterpret_cast<uintptr_t>(t.data) % es != 0 && t.nbytes > 0) {
            copies_.emplace_back(new uint8_t[t.nbytes]);
            std::memcpy(copies_.back().get(), t.data, t.nbytes);
            t.data = copies_.back().get();
        }
        if (t.nbytes > 0) order.push_back(&t);
    }
    std::sort(order.begin(), order.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < order.size(); ++i)
        if (order[i]->offset < order[i - 1]->offset + order[i - 1]->nbytes)
            throw Error(source_ + ": tensors '" + printable(order[i - 1]->name) + "' and '" +
                        printable(order[i]->name) + "' overlap in the data section");
}

const GgufValue* GgufFile::find(const std::string& key) const {
    const auto it = key_index_.find(key);
    return it == key_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

int64_t GgufFile::integer(const std::string& key, int64_t lo, int64_t hi, bool required, int64_t fallback) const {
    const GgufValue* v = find(key);
    std::string range = "[";  // appended, not one `+` chain: GCC 12 warns a false -Wrestrict on that chain here
    range += std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (!v) {
        if (required) fail(key, "is missing (expected an integer in " + range + ")");
        return fallback;
    }
    if (v->is_array() || !v->is_integer()) fail(key, "must be an integer in " + range + ", found " + v->brief());
    const int64_t x = v->integer();
    if (x < lo || x > hi || (v->elem == GgufType::u64 && load<uint64_t>(v->data) > uint64_t(INT64_MAX)))
        fail(key, "must be in " + range + ", found " + v->brief());
    return x;
}

double GgufFile::number(const std::string& key, bool required, double fallback) const {
    const GgufValue* v = find(key);
    if (!v) {
        if (required) fail(key, "is missing (expected a number)");
        return fallback;
    }
    if (v->is_array() || !(v->is_float() || v->is_integer())) fail(key, "must be a number, found " + v->brief());
    const double x = v->number();
    if (!std::isfinite(x)) fail(key, "must be a finite number, found " + v->brief());
    return x;
}

bool GgufFile::boolean(const std::string& key, bool fallback) const {
    const GgufValue* v = find(key);
    if (!v) return fallback;
    if (v->is_array() || v->elem != GgufType::boolean) fail(key, "must be a bool, found " + v->brief());
    return *v->data != 0;
}

std::string GgufFile::string(const std::string& key, bool required, const std::string& fallback) const {
    const GgufValue* v = find(key);
    if (!v) {
        if (required) fail(key, "is missing (expected a string)");
        return fallback;
    }
    if (v->is_array() || v->elem != GgufType::string) fail(key, "must be a string, found " + v->brief());
    return std::string(v->strings[0]);
}

const GgufValue& GgufFile::array(const std::string& key, GgufType elem, uint64_t count) const {
    const GgufValue* v = find(key);
    const std::string want = std::string("an array of ") +
                             (elem == GgufType::i64   ? "integers"
                              : elem == GgufType::f64 ? "numbers"
                                                      : gguf_type_name(elem)) +
                             (count ? " with " + std::to_string(count) + " elements" : "");
    if (!v) fail(key, "is missing (expected " + want + ")");
    const bool ok = elem == GgufType::i64 ? v->is_integer() : elem == GgufType::f64 ? v->is_float() : v->elem == elem;
    if (!v->is_array() || !ok || (count && v->count != count)) fail(key, "must be " + want + ", found " + v->brief());
    return *v;
}

bool GgufFile::maps(const void* p) const { return file_ && file_->contains(p); }

void GgufFile::release(const void* data, size_t nbytes) const {
    if (file_) file_->release(data, nbytes);
}

std::vector<std::filesystem::path> gguf_parts(const std::filesystem::path& path) {
    // NAME-KKKKK-of-NNNNN.gguf: five digits each
    const std::string name = path.filename().string();
    const std::string tail = "-00000-of-00000.gguf";
    if (name.size() < tail.size()) return {path};
    const size_t at = name.size() - tail.size();
    auto digits = [&](size_t from) {
        int v = 0;
        for (size_t i = from; i < from + 5; ++i) {
            if (name[i] < '0' || name[i] > '9') return -1;
            v = v * 10 + (name[i] - '0');
        }
        return v;
    };
    const int no = digits(at + 1), count = digits(at + 10);
    if (name[at] != '-' || name.compare(at + 6, 4, "-of-") != 0 || name.compare(name.size() - 5, 5, ".gguf") != 0 ||
        no < 0 || count < 0)
        return {path};
    const std::string stem = name.substr(0, at);
    if (count < 1 || no < 1 || no > count)
        throw Error(path.string() + ": a split GGUF's name must be NAME-0000K-of-0000N.gguf with 1 <= K <= N");
    std::vector<std::filesystem::path> parts;
    for (int k = 1; k <= count; ++k) {
        char suffix[32];
        std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", k, count);
        const std::filesystem::path p = path.parent_path() / (stem + suffix);
        std::error_code ec;
        if (!std::filesystem::exists(p, ec))
            throw Error(p.string() + ": missing (part " + std::to_string(k) + " of the " + std::to_string(count) +
                        " of a split GGUF model)");
        parts.push_back(p);
    }
    return parts;
}

bool is_gguf_model(const std::filesystem::path& path, std::filesystem::path* file) {
    namespace fs = std::filesystem;
    std::error_code ec;
    auto ends_gguf = [](const fs::path& p) {
        const std::string n = p.filename().string();
        return n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0;
    };
    if (fs::is_regular_file(path, ec)) {
        if (file) *file = path;
        if (ends_gguf(path)) return true;
        char magic[4] = {};
        if (FILE* f = std::fopen(path.c_str(), "rb")) {
            const size_t n = std::fread(magic, 1, 4, f);
            std::fclose(f);
            return n == 4 && std::memcmp(magic, "GGUF", 4) == 0;
        }
        return false;
    }
    if (!fs::is_directory(path, ec)) {  // a missing FILE.gguf: its error comes from opening it
        if (file) *file = path;
        return ends_gguf(path);
    }
    if (fs::exists(path / "model.safetensors", ec) || fs::exists(path / "model.safetensors.index.json", ec))
        return false;
    std::vector<fs::path> found;
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
        if (ends_gguf(e.path()) && e.is_regular_file(ec)) found.push_back(e.path());
    std::sort(found.begin(), found.end());
    if (found.empty()) return false;
    if (found.size() > 1 && gguf_parts(found.front()) != found)
        throw Error(path.string() + ": holds " + std::to_string(found.size()) + " .gguf files (" +
                    found[0].filename().string() + ", " + found[1].filename().string() +
                    (found.size() > 2 ? ", ..." : "") + "); give one with -m FILE.gguf");
    if (file) *file = found.front();
    return true;
}

GgufModel::GgufModel(const std::filesystem::path& path) {
    for (const auto& p : gguf_parts(path)) parts_.push_back(std::make_unique<GgufFile>(p));
    index();
}

GgufModel::GgufModel(std::unique_ptr<GgufFile> file) {
    parts_.push_back(std::move(file));
    index();
}

void GgufModel::index() {
    const GgufFile& first = *parts_.front();
    const bool split = parts_.size() > 1 || first.find("split.count");
    if (split) {
        const int64_t n = int64_t(parts_.size());
        int64_t total = 0;
        for (int64_t k = 0; k < n; ++k) {
            const GgufFile& f = *parts_[size_t(k)];
            if (f.integer("split.no", 0, 65535) != k)
                throw Error(f.source() + ": 'split.no' is " + std::to_string(f.integer("split.no", 0, 65535)) +
                            " but the file is part " + std::to_string(k + 1) + " (split.no " + std::to_string(k) + ")");
            if (f.integer("split.count", 1, 65535) != n)
                throw Error(f.source() + ": 'split.count' is " + std::to_string(f.integer("split.count", 1, 65535)) +
                            " but " + std::to_string(n) + " parts were given" +
                            (n == 1 ? " (give the first part, NAME-00001-of-0000N.gguf)" : ""));
            total += int64_t(f.tensors().size());
        }
        const int64_t want = first.integer("split.tensors.count", 0, INT32_MAX);
        if (total != want)
            throw Error(first.source() + ": 'split.tensors.count' is " + std::to_string(want) + " but the " +
                        std::to_string(n) + " parts hold " + std::to_string(total) + " tensors");
    }
    for (const auto& part : parts_)
        for (const GgufTensor& t : part->tensors()) {
            if (!by_name_.emplace(t.name, &t).second)
                throw Error(part->source() + ": tensor '" + printable(t.name) + "' is also in another part");
            tensors_.push_back(&t);
        }
}

const GgufTensor* GgufModel::tensor(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

void GgufModel::release(const void* data, size_t nbytes) const {
    for (const auto& p : parts_) p->release(data, nbytes);
}

size_t GgufModel::total_bytes() const {
    size_t n = 0;
    for (const GgufTensor* t : tensors_) n += t->nbytes;
    return n;
}

}  // namespace plainllama
