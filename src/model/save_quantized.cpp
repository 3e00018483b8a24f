#include "plainllama/model/save_quantized.h"

#include <algorithm>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plainllama/sys/error.h"

namespace plainllama {

namespace fs = std::filesystem;

namespace {

// One tensor of the output file.
struct OutTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t nbytes;
    QuantType quant;
};

// The tensors to write: every table entry, quantized matrices from their packed blocks, the rest from the source;
// and a tied model's quantized lm_head on its own.
std::vector<OutTensor> tensors_of(const Model& m) {
    std::vector<OutTensor> t;
    auto add = [&](const std::string& name, const Weight& w, const TensorView& src) {
        if (w.packed.quant != QuantType::none) {  // the blocks in GGUF's layout (rows, not the tiles of memory)
            const int64_t row = int64_t(quant_row_bytes(w.packed.quant, w.cols));
            t.push_back({name, DType::U8, {w.rows, row}, w.packed.data, size_t(w.rows * row), w.packed.quant});
        } else {
            t.push_back({name, src.dtype, src.shape, src.data, src.nbytes, QuantType::none});
        }
    };
    for (const TensorSpec& s : llama_tensor_table(m.config())) {
        const Weight& w = weight_of(m.weights(), s);
        add(s.name, s.matrix ? w : Weight{}, *m.checkpoint().find(s.name));
    }
    const Weight& head = m.weights().lm_head;
    if (m.config().tie_word_embeddings && head.packed.quant != QuantType::none)
        add("lm_head.weight", head, *m.checkpoint().find("model.embed_tokens.weight"));
    // F32 first, then the 16-bit types, then the blocks: with the data region 64-byte aligned, every tensor starts
    // at a multiple of its element size, and the tensors are contiguous (as safetensors readers require).
    std::stable_sort(t.begin(), t.end(), [](const OutTensor& a, const OutTensor& b) {
        return dtype_size(a.dtype) > dtype_size(b.dtype);
    });
    return t;
}

void write_all(std::FILE* f, const void* p, size_t n, const fs::path& path) {
    if (n > 0 && std::fwrite(p, 1, n, f) != n)
        throw Error(path.string() + ": write failed: " + std::strerror(errno));
}

void copy_if_present(const fs::path& from_dir, const fs::path& to_dir, const char* name) {
    const fs::path from = from_dir / name;
    if (!fs::is_regular_file(from)) return;
    std::error_code ec;
    fs::copy_file(from, to_dir / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error((to_dir / name).string() + ": cannot copy " + from.string() + ": " + ec.message());
}

}  // namespace

void save_quantized(const Model& model, const fs::path& out) {
    PL_CHECK(model.quant() != QuantScheme::none);
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) throw Error(out.string() + ": cannot create the folder: " + ec.message());
    const fs::path target = out / "model.safetensors";
    const fs::path tmp = out / (".model.safetensors." + std::to_string(::getpid()) + ".partial");
    if (fs::equivalent(out, model.dir(), ec)) throw Error(out.string() + ": is the model's own folder");
    for (const fs::directory_entry& e : fs::directory_iterator(out, ec)) {  // weights a load would read
        const std::string name = e.path().filename().string();
        if (name == "model.safetensors.index.json" || (name.size() > 12 && name.substr(name.size() - 12) == ".safetensors"))
            throw Error((out / name).string() + ": exists; give an empty or new folder with -o");
    }
    if (ec) throw Error(out.string() + ": cannot list the folder: " + ec.message());

    const std::vector<OutTensor> tensors = tensors_of(model);
    nlohmann::ordered_json header;
    nlohmann::ordered_json meta = {{"format", "pt"}, {kQuantSchemeKey, scheme_name(model.quant())}};
    size_t offset = 0;
    for (const OutTensor& t : tensors) {
        header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
        offset += t.nbytes;
        if (t.quant != QuantType::none) meta[kQuantKey + t.name] = quant_name(t.quant);
    }
    header["__metadata__"] = meta;
    std::string h = header.dump();
    h.append((64 - (8 + h.size()) % 64) % 64, ' ');  // the data region starts 64-byte aligned
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(h.size()) >> (8 * i));

    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) throw Error(tmp.string() + ": cannot create: " + std::strerror(errno));
    try {
        write_all(f, len, 8, tmp);
        write_all(f, h.data(), h.size(), tmp);
        std::vector<uint8_t> row;
        for (const OutTensor& t : tensors) {
            if (!tiled(t.quant, t.shape[0])) {
                write_all(f, t.data, t.nbytes, tmp);
                continue;
            }
            const int64_t nb = t.shape[1] / int64_t(quant_block_bytes(t.quant));  // the tiles back to rows
            row.resize(size_t(t.shape[1]));
            for (int64_t r = 0; r < t.shape[0]; ++r) {
                deinterleave(t.quant, row.data(),
                             static_cast<const uint8_t*>(t.data) + size_t(r / 16 * nb) * tile_bytes(t.quant), r % 16, 0,
                             nb, r / 16 * nb);
                write_all(f, row.data(), row.size(), tmp);
            }
        }
        if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
            throw Error(tmp.string() + ": write failed: " + std::strerror(errno));
    } catch (...) {
        std::fclose(f);
        fs::remove(tmp, ec);
        throw;
    }
    if (std::fclose(f) != 0) {
        const std::string why = std::strerror(errno);
        fs::remove(tmp, ec);
        throw Error(tmp.string() + ": write failed on close: " + why);
    }
    for (const char* name : {"config.json", "generation_config.json", "tokenizer.model", "tokenizer.json",
                             "tokenizer_config.json", "special_tokens_map.json"}) {
        try {
            copy_if_present(model.dir(), out, name);
        } catch (...) {
            fs::remove(tmp, ec);
            throw;
        }
    }
    fs::rename(tmp, target, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw Error(target.string() + ": cannot rename the written file into place");
    }
}

}  // namespace plainllama
