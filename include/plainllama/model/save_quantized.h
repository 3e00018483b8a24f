// A quantized model saved as a folder that loads without quantizing again (plainllama quantize): config,
// generation config and tokenizer files copied, and one model.safetensors holding every tensor the model reads:
// the quantized matrices as U8 [rows, row bytes] of GGUF-layout blocks (quant.h), their formats and the scheme in
// __metadata__ (weights.h's keys), the rest as in the source. Loading maps it and uses the blocks in place.
#pragma once
#include <filesystem>

#include "plainllama/model/model.h"

namespace plainllama {

// Writes `out` (created if missing; an existing model.safetensors there is an error) from a model loaded with a
// QuantScheme other than none. The file is written beside its final name and renamed into place only once every
// write and the close have succeeded; any failure is an Error naming the file, and leaves no model.safetensors.
void save_quantized(const Model& model, const std::filesystem::path& out);

}  // namespace plainllama
