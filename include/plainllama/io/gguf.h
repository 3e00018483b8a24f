// GGUF files (llama.cpp's format), versions 2 and 3, little-endian: the header's metadata (key -> typed value) and
// tensor infos, then the tensors' data, each at an offset aligned to general.alignment. The reader maps the file
// read-only and checks every count, length, dimension product and offset against the file before anything is
// exposed; bad input is an Error naming the file and the key or tensor. A model split over several files
// (NAME-00001-of-00003.gguf ...: llama.cpp's gguf-split) is read as one (GgufModel).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "plainllama/io/safetensors.h"

namespace plainllama {

// The types of metadata values (GGUF's numbering).
enum class GgufType : uint32_t { u8, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };
const char* gguf_type_name(GgufType t);  // "u8", ..., "string", "array"

// A metadata value: a scalar, or an array of scalars (GGUF allows no arrays of arrays). Strings are views of the
// mapped file.
struct GgufValue {
    GgufType type = GgufType::u8;           // array: then `elem` is the element type
    GgufType elem = GgufType::u8;           // the type of each element (of a scalar: its own)
    uint64_t count = 1;                     // elements (1 for a scalar)
    const uint8_t* data = nullptr;          // numbers and bools: count little-endian elements, unaligned
    std::vector<std::string_view> strings;  // a string, or each string of an array of strings

    bool is_array() const { return type == GgufType::array; }
    bool is_integer() const;  // elements of an integer type (not bool)
    bool is_float() const;    // elements of f32 or f64
    // Element i (i < count) as a number: integers and bools exactly (an u64 past 2^63 - 1 as 2^63 - 1 in
    // integer()), floats widened to double.
    int64_t integer(uint64_t i = 0) const;
    double number(uint64_t i = 0) const;
    // "u32 4096", "string \"llama\"", "array of 32000 strings": for messages (short, one line).
    std::string brief() const;
};

// Tensor types (ggml's numbering) and their blocks.
struct GgmlType {
    uint32_t id;
    const char* name;    // llama.cpp's spelling: "F32", "Q4_K", ...
    int64_t block;       // elements per block (1 for plain types)
    size_t block_bytes;  // bytes per block
};
const GgmlType* ggml_type(uint32_t id);  // null for an id ggml does not define
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ5_0 = 6, kGgmlQ8_0 = 8, kGgmlQ2_K = 10,
                   kGgmlQ4_K = 12, kGgmlQ5_K = 13, kGgmlQ6_K = 14, kGgmlBF16 = 30;

struct GgufTensor {
    std::string name;
    const GgmlType* type = nullptr;
    std::vector<int64_t> ne;        // GGUF's order: ne[0] is the length of a row (contiguous), ne[1] the rows, ...
    const uint8_t* data = nullptr;  // into the mapping, or an aligned copy (a float tensor at an odd offset)
    size_t nbytes = 0;
    uint64_t offset = 0;  // in the file
    std::string file;     // which file, for messages

    int64_t rows() const;           // the product of ne[1..]
    std::string shape_str() const;  // "[256, 512]" (ne order)
};

// One GGUF file, parsed. The views and tensors' data point into `bytes` (or the owned mapping).
class GgufFile {
   public:
    // Maps `path` and parses it.
    explicit GgufFile(const std::filesystem::path& path);
    // Parses [bytes, bytes + size) (which must outlive the object); `source` names it in messages.
    GgufFile(const uint8_t* bytes, size_t size, const std::string& source);
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    const std::string& source() const { return source_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    size_t header_bytes() const { return header_bytes_; }  // the magic, metadata and tensor infos
    // Keys in file order.
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
    const GgufValue* find(const std::string& key) const;
    const std::vector<GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* tensor(const std::string& name) const;

    // Typed reads of a key; each throws Error "<file>: '<key>' ..." saying what was expected. A missing key is
    // an error when `required`, else `fallback` is returned.
    int64_t integer(const std::string& key, int64_t lo, int64_t hi, bool required = true, int64_t fallback = 0) const;
    double number(const std::string& key, bool required = true, double fallback = 0) const;  // finite
    bool boolean(const std::string& key, bool fallback) const;
    std::string string(const std::string& key, bool required = true, const std::string& fallback = "") const;
    // An array of `elem` type (any integer type when elem is i64, f32 or f64 when f64); `count` elements when not 0.
    const GgufValue& array(const std::string& key, GgufType elem, uint64_t count = 0) const;
    // Drops the pages wholly inside [data, data + nbytes) when they belong to the mapping (as Checkpoint::release).
    void release(const void* data, size_t nbytes) const;
    bool maps(const void* p) const;

   private:
    void parse(const uint8_t* bytes, size_t size);
    [[noreturn]] void fail(const std::string& key, const std::string& what) const;

    std::string source_;
    std::shared_ptr<MappedFile> file_;  // null when parsing bytes the caller owns
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    size_t header_bytes_ = 0;
    std::vector<std::pair<std::string, GgufValue>> kv_;
    std::map<std::string, size_t, std::less<>> key_index_;
    std::vector<GgufTensor> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
    std::vector<std::unique_ptr<uint8_t[]>> copies_;
};

// The files of a GGUF model: `path` itself, or every part of a split model when its name is one of them
// (NAME-00002-of-00003.gguf: parts 1 to 3, all present). Error naming a missing part.
std::vector<std::filesystem::path> gguf_parts(const std::filesystem::path& path);

// Whether -m PATH names a GGUF model: a file (or a link to one) whose first bytes are "GGUF" or whose name ends in
// ".gguf", or a folder holding no safetensors model and exactly one .gguf file or split set (then *file is set to
// its first part). Error for a folder holding several.
bool is_gguf_model(const std::filesystem::path& path, std::filesystem::path* file = nullptr);

// A GGUF model, one file or a split set read as one: the metadata of the first part (each part's split.* keys
// checked: split.no, split.count, split.tensors.count) and the tensors of all parts, each name once.
class GgufModel {
   public:
    explicit GgufModel(const std::filesystem::path& path);
    // One file already parsed (the fuzz target's).
    explicit GgufModel(std::unique_ptr<GgufFile> file);
    const GgufFile& meta() const { return *parts_.front(); }  // the first part: the model's metadata
    const std::vector<std::unique_ptr<GgufFile>>& parts() const { return parts_; }
    const GgufTensor* tensor(const std::string& name) const;
    const std::vector<const GgufTensor*>& tensors() const { return tensors_; }  // every part's, in order
    void release(const void* data, size_t nbytes) const;
    size_t total_bytes() const;

   private:
    void index();  // checks the parts' split.* keys, indexes their tensors

    std::vector<std::unique_ptr<GgufFile>> parts_;
    std::vector<const GgufTensor*> tensors_;
    std::map<std::string, const GgufTensor*, std::less<>> by_name_;
};

}  // namespace plainllama
