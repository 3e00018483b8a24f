#include "commands.h"

namespace plainllama::cli {

Run add_bench(CLI::App& app) {
    app.add_subcommand("bench", "(not yet implemented)");
    return [] { return 1; };
}

}  // namespace plainllama::cli
