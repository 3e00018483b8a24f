#include "commands.h"

namespace plainllama::cli {

Run add_chat(CLI::App& app) {
    app.add_subcommand("chat", "(not yet implemented)");
    return [] { return 1; };
}

}  // namespace plainllama::cli
