// Writing a GGUF file (version 3, little-endian, alignment 32): metadata in the order added, tensor infos, then each
// tensor's data, streamed from a callback, at an offset aligned to 32. The file is written through a PartialFile
// (io/output.h): beside its final name, renamed into place once every write, the flush to disk and the close have
// succeeded; any failure (or SIGINT, SIGTERM) is an Error naming the file, and leaves nothing behind.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "plainllama/io/gguf.h"

namespace plainllama {

class GgufWriter {
   public:
    // Each adds one key (keys must be unique).
    void add_u32(const std::string& key, uint32_t v);
    void add_i32(const std::string& key, int32_t v);
    void add_f32(const std::string& key, float v);
    void add_bool(const std::string& key, bool v);
    void add_string(const std::string& key, const std::string& v);
    void add_strings(const std::string& key, const std::vector<std::string>& v);
    void add_f32s(const std::string& key, const std::vector<float>& v);
    void add_i32s(const std::string& key, const std::vector<int32_t>& v);

    // Appends bytes to the file.
    using Sink = std::function<void(const void* data, size_t n)>;
    // A tensor: its name, shape in GGUF's order (the row length first), ggml type, and a callback that writes its
    // ggml_type(type) size in bytes exactly, in pieces of any size, through the sink.
    void add_tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type,
                    std::function<void(const Sink&)> write);

    // Writes the file (see above).
    void write(const std::filesystem::path& path) const;

   private:
    struct Tensor {
        std::string name;
        std::vector<int64_t> ne;
        uint32_t type;
        size_t nbytes;
        std::function<void(const Sink&)> write;
    };
    void key(const std::string& k, GgufType t);

    std::string header_kv_;  // the metadata, encoded
    uint64_t n_kv_ = 0;
    std::vector<std::string> keys_;
    std::vector<Tensor> tensors_;
};

}  // namespace plainllama
