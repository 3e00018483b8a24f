#include "plainllama/model/save_quantized.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plainllama/io/file.h"
#include "plainllama/sys/error.h"

namespace plainllama {

namespace fs = std::filesystem;

namespace {

// The source folder's files a saved folder needs beside the weights (those present are copied).
constexpr const char* kCopiedFiles[] = {"config.json",    "generation_config.json", "tokenizer.model",
                                        "tokenizer.json", "tokenizer_config.json",  "special_tokens_map.json"};

// One tensor of the output file.
struct OutTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t nbytes;
    QuantType quant;
    bool tiles;  // data: the tiles of memory (written back as rows)
};

// The tensors to write: every table entry, quantized matrices from their packed blocks, a quantized embedding from its
// rows, the rest from the source; and a tied model's lm_head quantized apart from a float embedding (a folder saved
// before the embedding was quantized too) on its own.
std::vector<OutTensor> tensors_of(const Model& m) {
    std::vector<OutTensor> t;
    auto add = [&](const std::string& name, const Weight& w, const TensorView& src) {
        const int64_t row = int64_t(quant_row_bytes(w.packed.quant, w.cols));
        if (w.packed.quant != QuantType::none)  // the blocks in GGUF's layout (rows, not the tiles of memory)
            t.push_back({name,
                         DType::U8,
                         {w.rows, row},
                         w.packed.data,
                         size_t(w.rows * row),
                         w.packed.quant,
                         tiled(w.packed.quant, w.rows)});
        else
            t.push_back({name, src.dtype, src.shape, src.data, src.nbytes, QuantType::none, false});
    };
    const Weight& E = m.weights().embed_tokens;
    for (const TensorSpec& s : llama_tensor_table(m.config())) {
        const Weight& w = weight_of(m.weights(), s);
        if (&w == &E && E.quant != QuantType::none) {  // rows of blocks
            const int64_t row = int64_t(quant_row_bytes(E.quant, E.cols));
            t.push_back({s.name, DType::U8, {E.rows, row}, E.data, size_t(E.rows * row), E.quant, false});
            continue;
        }
        add(s.name, s.matrix ? w : Weight{}, *m.checkpoint().find(s.name));
    }
    const Weight& head = m.weights().lm_head;
    if (m.config().tie_word_embeddings && head.packed.quant != QuantType::none && head.data != E.data)
        add("lm_head.weight", head, *m.checkpoint().find("model.embed_tokens.weight"));
    // F32 first, then the 16-bit types, then the blocks: with the data region 64-byte aligned, every tensor starts
    // at a multiple of its element size, and the tensors are contiguous (as safetensors readers require).
    std::stable_sort(t.begin(), t.end(),
                     [](const OutTensor& a, const OutTensor& b) { return dtype_size(a.dtype) > dtype_size(b.dtype); });
    return t;
}

}  // namespace

void save_quantized(const Model& model, OutputFolder& folder) {
    PL_CHECK(model.quant() != QuantScheme::none);
    const fs::path& out = folder.path();
    const std::vector<OutTensor> tensors = tensors_of(model);
    nlohmann::ordered_json header;
    nlohmann::ordered_json meta = {{"format", "pt"}, {kQuantSchemeKey, scheme_name(model.quant())}};
    size_t offset = 0;
    for (const OutTensor& t : tensors) {
        header[t.name] = {
            {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
        offset += t.nbytes;
        if (t.quant != QuantType::none) meta[kQuantKey + t.name] = quant_name(t.quant);
    }
    header["__metadata__"] = meta;
    std::string h = header.dump();
    h.append((64 - (8 + h.size()) % 64) % 64, ' ');  // the data region starts 64-byte aligned
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(h.size()) >> (8 * i));

    // Every file partial until all are written; the small ones renamed into place first, the weights last: a folder
    // with a model.safetensors is complete.
    PartialFile f(out / "model.safetensors");
    f.write(len, 8);
    f.write(h);
    std::vector<uint8_t> row;
    for (const OutTensor& t : tensors) {
        if (!t.tiles) {
            f.write(t.data, t.nbytes);
            continue;
        }
        const int64_t nb = t.shape[1] / int64_t(quant_block_bytes(t.quant));  // the tiles back to rows
        row.resize(size_t(t.shape[1]));
        for (int64_t r = 0; r < t.shape[0]; ++r) {
            deinterleave(t.quant, row.data(),
                         static_cast<const uint8_t*>(t.data) + size_t(r / 16 * nb) * tile_bytes(t.quant), r % 16, 0, nb,
                         r / 16 * nb);
            f.write(row.data(), row.size());
        }
    }
    std::vector<std::unique_ptr<PartialFile>> copies;
    for (const char* name : kCopiedFiles) {
        const fs::path from = model.dir() / name;
        std::error_code ec;
        if (!fs::is_regular_file(from, ec)) continue;
        copies.push_back(std::make_unique<PartialFile>(out / name));
        copies.back()->write(read_file(from));
    }
    for (auto& c : copies) c->commit();
    f.commit();
    folder.keep();
}

}  // namespace plainllama
