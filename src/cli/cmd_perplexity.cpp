#include "commands.h"

namespace plainllama::cli {

Run add_perplexity(CLI::App& app) {
    app.add_subcommand("perplexity", "(not yet implemented)");
    return [] { return 1; };
}

}  // namespace plainllama::cli
