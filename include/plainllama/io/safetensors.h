// safetensors files, memory-mapped read-only; a checkpoint is one file or shards listed in
// model.safetensors.index.json. Every header field is validated before a tensor is exposed.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plainllama/io/dtype.h"

namespace plainllama {

// s with control bytes (newline, NUL, ...) escaped as \xNN, so that a name read from a file
// keeps an error message on one line.
std::string printable(const std::string& s);

// "[64, 512]"
std::string shape_str(const std::vector<int64_t>& shape);

struct TensorView {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const void* data = nullptr;  // into the mapping, or an aligned copy when the file's offset is not
    size_t nbytes = 0;
    std::string file;  // which file it came from, for messages

    int64_t numel() const;
    std::string shape_str() const { return plainllama::shape_str(shape); }
};

// A read-only private mapping of a whole file.
class MappedFile {
   public:
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    bool contains(const void* p) const { return p >= data_ && p < data_ + size_; }
    // Drops the pages wholly inside [data, data + nbytes) from memory when they are in this mapping (a later read
    // brings them back from the file).
    void release(const void* data, size_t nbytes) const;

   private:
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

// The tensors of one safetensors buffer. Their data points into `bytes` (which must outlive them), or, with
// copy_unaligned, into `copies` for tensors whose offset is not aligned to their element size (without it such a
// tensor's data stays unaligned in `bytes`: for reading the header only).
struct SafetensorsContents {
    std::vector<TensorView> tensors;
    std::map<std::string, std::string> metadata;  // the header's __metadata__
    std::vector<std::unique_ptr<uint8_t[]>> copies;
};
// Validates header length, JSON, dtypes, shapes, offsets, overlaps. `source` names the file.
SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& source,
                                      bool copy_unaligned = true);

class GgufModel;

// All tensors of a model folder, by name; or of a GGUF model, by the HF names the model layer gives them
// (model/gguf_model.h).
class Checkpoint {
   public:
    // dir/model.safetensors.index.json if present (every shard mapped, each tensor exactly once),
    // else dir/model.safetensors. read_data false: only the headers are read (no tensor is copied, see
    // parse_safetensors), so that no page of the weights is touched.
    explicit Checkpoint(const std::filesystem::path& dir, bool read_data = true);
    // A GGUF model's tensors under HF names, with metadata as a saved quantized folder's (each quantized tensor's
    // format under kQuantKey, weights.h).
    Checkpoint(std::shared_ptr<const GgufModel> gguf, std::map<std::string, TensorView> tensors,
               std::map<std::string, std::string> metadata);
    const GgufModel* gguf() const { return gguf_.get(); }  // null for a safetensors folder
    const TensorView* find(const std::string& name) const;
    const std::map<std::string, TensorView>& tensors() const { return tensors_; }
    // Every file's __metadata__ entries (shards that disagree on a key are an error).
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    size_t total_bytes() const;
    // Drops the pages wholly inside [data, data + nbytes) from memory when they belong to a mapping (a later
    // read brings them back from the file): for tensors the model has copied elsewhere.
    void release(const void* data, size_t nbytes) const;

   private:
    std::vector<std::unique_ptr<MappedFile>> files_;
    std::vector<SafetensorsContents> contents_;
    std::map<std::string, TensorView> tensors_;
    std::map<std::string, std::string> metadata_;
    std::shared_ptr<const GgufModel> gguf_;
};

}  // namespace plainllama
