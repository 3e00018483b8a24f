// The chat's user lines. On a terminal: libedit (BSD-licensed line editing: arrow keys, the emacs bindings,
// ~/.editrc), with the session's lines recalled by up-arrow and kept across sessions in a history file. On a pipe
// or a file: plain read(2), line by line, as the bytes come.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

namespace plainllama::cli {

enum class ReadStatus { line, eof, interrupted };

// Where the history lives: the file, and the folder above it that must exist already ($XDG_STATE_HOME or $HOME: the
// folders between them are created, 0700, those two never).
struct HistoryFile {
    std::filesystem::path file, base;
};

class LineInput {
   public:
    // `history_file` (terminal only; an empty file: none) is read now and written back by save_history(), mode 0600, as
    // a new file renamed over the old one. Only a file that is ours is used: a regular file, not a symlink (never
    // followed), empty or in libedit's format; anything else is left as it is, with one warning, and the chat runs
    // without history. Other problems with it are warnings on stderr too: the chat goes on without.
    explicit LineInput(HistoryFile history_file = {});
    ~LineInput();
    LineInput(const LineInput&) = delete;
    LineInput& operator=(const LineInput&) = delete;

    bool terminal() const { return editor_ != nullptr; }

    // The next line, without its newline. A Ctrl-C while waiting (SIGINT, installed without SA_RESTART) gives
    // `interrupted`.
    ReadStatus next(std::string& line, const char* prompt);

    // Remembers a line the user sent, for up-arrow (terminal only).
    void remember(const std::string& line);

    // Writes the history file, when there is one (a warning on failure).
    void save_history();

   private:
    struct Editor;
    std::unique_ptr<Editor> editor_;  // null: not a terminal
    std::string buf_;                 // read(2) mode: bytes after the last line returned
    bool eof_ = false;
};

// $XDG_STATE_HOME/plainllama/history (an absolute $XDG_STATE_HOME), or ~/.local/state/plainllama/history; empty when
// neither variable is set.
HistoryFile default_history_file();

}  // namespace plainllama::cli
