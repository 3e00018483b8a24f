// The subcommands of the plainllama binary. Each adds itself to the app; main() runs the chosen one.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace plainllama::cli {

// A subcommand's body, run after parsing; returns the exit status.
using Run = std::function<int()>;

Run add_inspect(CLI::App& app);
Run add_generate(CLI::App& app);
Run add_chat(CLI::App& app);
Run add_perplexity(CLI::App& app);
Run add_bench(CLI::App& app);
Run add_tokenize(CLI::App& app);
Run add_quantize(CLI::App& app);
Run add_serve(CLI::App& app);

}  // namespace plainllama::cli
