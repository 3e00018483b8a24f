#include "commands.h"

namespace plainllama::cli {

Run add_generate(CLI::App& app) {
    app.add_subcommand("generate", "(not yet implemented)");
    return [] { return 1; };
}

}  // namespace plainllama::cli
