// A quantized model saved as a folder that loads without quantizing again (plainllama quantize): config,
// generation config and tokenizer files copied, and one model.safetensors holding every tensor the model reads:
// the quantized matrices as U8 [rows, row bytes] of GGUF-layout blocks (quant.h), their formats and the scheme in
// __metadata__ (weights.h's keys), the rest as in the source. Loading maps it and uses the blocks in place.
#pragma once
#include <filesystem>

#include "plainllama/io/output.h"
#include "plainllama/model/model.h"

namespace plainllama {

// Writes the folder (new or empty: see OutputFolder) from a model loaded with a QuantScheme other than none. Every
// file is written under a partial name and renamed into place only once all of them are complete (model.safetensors
// last); any failure is an Error naming the file and the errno's text, and leaves nothing behind; so does SIGINT or
// SIGTERM. The folder is kept once it is complete.
void save_quantized(const Model& model, OutputFolder& out);

}  // namespace plainllama
