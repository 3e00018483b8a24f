#include "plainllama/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "plainllama/io/config.h"
#include "plainllama/io/file.h"
#include "plainllama/io/gguf.h"
#include "plainllama/sys/error.h"

namespace plainllama {

using json = nlohmann::json;

std::string printable(const std::string& s) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char ch : s) {
        if (ch < 0x20 || ch == 0x7f) {
            out += "\\x";
            out += hex[ch >> 4];
            out += hex[ch & 15];
        } else {
            out += char(ch);
        }
    }
    return out;
}

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

MappedFile::MappedFile(const std::filesystem::path& path) {
    const std::string p = path.string();
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // O_NONBLOCK: a FIFO must not hang open()
    if (fd < 0) throw Error(p + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(p + ": not a regular file");
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
        void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            ::close(fd);
            throw Error(p + ": mmap failed: " + std::strerror(errno));
        }
        data_ = static_cast<const uint8_t*>(m);
    }
    ::close(fd);
}

void MappedFile::release(const void* data, size_t nbytes) const {
    if (!contains(data)) return;
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE)), begin = reinterpret_cast<uintptr_t>(data);
    const uintptr_t lo = (begin + page - 1) / page * page, hi = (begin + nbytes) / page * page;
    if (lo < hi) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);  // advice: failure is harmless
}

void Checkpoint::release(const void* data, size_t nbytes) const {
    for (const auto& f : files_) f->release(data, nbytes);
    if (gguf_) gguf_->release(data, nbytes);
}

Checkpoint::Checkpoint(std::shared_ptr<const GgufModel> gguf, std::map<std::string, TensorView> tensors,
                       std::map<std::string, std::string> metadata)
    : tensors_(std::move(tensors)), metadata_(std::move(metadata)), gguf_(std::move(gguf)) {}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

namespace {

// a * b, or false on overflow past `limit`.
bool mul_checked(uint64_t a, uint64_t b, uint64_t limit, uint64_t* out) {
    if (a != 0 && b > limit / a) return false;
    *out = a * b;
    return *out <= limit;
}

}  // namespace

SafetensorsContents parse_safetensors(const uint8_t* bytes, size_t size, const std::string& src, bool copy_unaligned) {
    if (size < 8)
        throw Error(src + ": file is " + std::to_string(size) +
                    " bytes; a safetensors file has at least 8 (the header length)");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | bytes[i];
    if (header_len > size - 8)
        throw Error(src + ": header length " + std::to_string(header_len) + " runs past the end of the " +
                    std::to_string(size) + "-byte file");
    const char* hdr = reinterpret_cast<const char*>(bytes + 8);
    json j = json::parse(hdr, hdr + header_len, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error(src + ": header is not valid JSON");
    if (!j.is_object()) throw Error(src + ": header must be a JSON object");

    const uint8_t* data = bytes + 8 + header_len;
    const uint64_t data_size = size - 8 - header_len;
    SafetensorsContents out;
    struct Range {
        uint64_t begin, end;
        std::string name;
    };
    std::vector<Range> ranges;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") {
            if (!it.value().is_object()) throw Error(src + ": __metadata__ must be an object of strings");
            for (auto m = it.value().begin(); m != it.value().end(); ++m) {
                if (!m.value().is_string())
                    throw Error(src + ": __metadata__ '" + printable(m.key()) + "' must be a string");
                out.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const json& t = it.value();
        const std::string where = src + ": tensor '" + printable(name) + "'";
        if (!t.is_object()) throw Error(where + ": entry must be an object");
        auto dt = t.find("dtype"), sh = t.find("shape"), off = t.find("data_offsets");
        if (dt == t.end() || !dt->is_string()) throw Error(where + ": 'dtype' missing or not a string");
        TensorView v;
        v.name = name;
        v.file = src;
        if (!parse_dtype(dt->get<std::string>(), &v.dtype))
            throw Error(where + ": dtype " + printable(dt->get<std::string>()) +
                        " is not supported (expected F32, F16, BF16, or U8 for quantized blocks)");
        if (sh == t.end() || !sh->is_array()) throw Error(where + ": 'shape' missing or not an array");
        if (sh->size() > 8)
            throw Error(where + ": shape has " + std::to_string(sh->size()) + " dimensions (at most 8)");
        uint64_t numel = 1;
        for (const json& d : *sh) {
            if (!d.is_number_unsigned())
                throw Error(where + ": shape " + json_brief(*sh) + " must hold non-negative integers");
            uint64_t dim = d.get<uint64_t>();
            if (dim > uint64_t(INT64_MAX))  // only reachable after a 0 dim; would turn negative below
                throw Error(where + ": shape " + json_brief(*sh) + " has a dimension past 2^63 - 1");
            if (!mul_checked(numel, dim, data_size, &numel))
                throw Error(where + ": shape " + json_brief(*sh) + " is larger than the file's data (" +
                            std::to_string(data_size) + " bytes)");
            v.shape.push_back(int64_t(dim));
        }
        if (off == t.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
            !(*off)[1].is_number_unsigned())
            throw Error(where + ": 'data_offsets' must be [begin, end] with non-negative integers");
        uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
        if (b > e || e > data_size)
            throw Error(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                        "] are not within the data region of " + std::to_string(data_size) + " bytes");
        uint64_t nbytes = 0;
        if (!mul_checked(numel, dtype_size(v.dtype), data_size, &nbytes) || nbytes != e - b)
            throw Error(where + ": shape " + v.shape_str() + " of " + dtype_name(v.dtype) + " needs " +
                        std::to_string(numel) + " x " + std::to_string(dtype_size(v.dtype)) +
                        " bytes but data_offsets span " + std::to_string(e - b));
        v.nbytes = size_t(nbytes);
        const uint8_t* p = data + b;
        if (copy_unaligned && reinterpret_cast<uintptr_t>(p) % dtype_size(v.dtype) != 0) {
            out.copies.emplace_back(new uint8_t[nbytes]);  // operator new[] aligns to 16
            std::memcpy(out.copies.back().get(), p, nbytes);
            p = out.copies.back().get();
        }
        v.data = p;
        if (nbytes > 0) ranges.push_back({b, e, name});
        out.tensors.push_back(std::move(v));
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].begin < ranges[i - 1].end)
            throw Error(src + ": tensors '" + printable(ranges[i - 1].name) + "' and '" + printable(ranges[i].name) +
                        "' overlap in the data region");
    return out;
}

Checkpoint::Checkpoint(const std::filesystem::path& dir, bool read_data) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(dir.string() + ": not a directory (expected a model folder)");
    const fs::path index = dir / "model.safetensors.index.json";
    std::vector<std::string> shard_names;
    json weight_map;
    // A name that is present, even as a dangling link or a symlink loop, is opened, so that the error says why
    // it cannot be read instead of "missing".
    auto present = [&](const fs::path& p) { return fs::symlink_status(p, ec).type() != fs::file_type::not_found; };
    if (present(index)) {
        json j = json::parse(read_file(index), nullptr, false);
        if (j.is_discarded()) throw Error(index.string() + ": invalid JSON");
        if (!j.is_object()) throw Error(index.string() + ": expected a JSON object at the top level");
        auto wm = j.find("weight_map");
        if (wm == j.end() || !wm->is_object() || wm->empty())
            throw Error(index.string() + ": 'weight_map' missing or not a non-empty object");
        weight_map = *wm;
        std::set<std::string> seen;
        for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
            if (!it->is_string())
                throw Error(index.string() + ": weight_map['" + printable(it.key()) + "'] must be a file name");
            std::string f = it->get<std::string>();
            if (f.empty() || f.find_first_of(std::string("/\0", 2)) != std::string::npos || f == "." || f == "..")
                throw Error(index.string() + ": weight_map['" + printable(it.key()) + "'] = '" + printable(f) +
                            "' must be a plain file name in the model folder");
            if (seen.insert(f).second) shard_names.push_back(f);
        }
    } else if (present(dir / "model.safetensors")) {
        shard_names.push_back("model.safetensors");
    } else {
        throw Error(dir.string() + ": no model.safetensors or model.safetensors.index.json");
    }
    for (const std::string& name : shard_names) {
        const fs::path p = dir / name;
        if (!present(p))
            throw Error((weight_map.is_null() ? p.string() : index.string() + ": shard " + name) + " does not exist");
        files_.push_back(std::make_unique<MappedFile>(p));
        contents_.push_back(parse_safetensors(files_.back()->data(), files_.back()->size(), p.string(), read_data));
        for (TensorView& t : contents_.back().tensors) {
            if (!weight_map.is_null()) {
                // Every tensor of a shard must be mapped to that shard: a copy in a second shard, or one the
                // index does not list, is ambiguous.
                auto it = weight_map.find(t.name);
                if (it == weight_map.end())
                    throw Error(p.string() + ": tensor '" + printable(t.name) +
                                "' is not listed in the weight_map of " + index.string());
                if (it->get<std::string>() != name)
                    throw Error(p.string() + ": tensor '" + printable(t.name) + "' is also in this shard, but " +
                                index.string() + " maps it to " + printable(it->get<std::string>()));
            }
            if (tensors_.count(t.name)) throw Error(p.string() + ": tensor '" + printable(t.name) + "' appears twice");
            tensors_.emplace(t.name, t);
        }
        for (const auto& [key, value] : contents_.back().metadata) {
            auto [it, fresh] = metadata_.emplace(key, value);
            if (!fresh && it->second != value)
                throw Error(p.string() + ": __metadata__ '" + printable(key) + "' is " + printable(value) +
                            " here but " + printable(it->second) + " in another shard");
        }
    }
    if (!weight_map.is_null())
        for (auto it = weight_map.begin(); it != weight_map.end(); ++it)
            if (!tensors_.count(it.key()))
                throw Error(index.string() + ": tensor '" + printable(it.key()) + "' is not in shard " +
                            printable(it->get<std::string>()));
}

const TensorView* Checkpoint::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

size_t Checkpoint::total_bytes() const {
    size_t n = 0;
    for (const auto& [_, t] : tensors_) n += t.nbytes;
    return n;
}

}  // namespace plainllama
