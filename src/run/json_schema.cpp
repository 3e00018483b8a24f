// JSON Schema -> GBNF (json_schema.h): one rule per schema, named after where it is (root, root-name, item-tags).
#include "plainllama/run/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "plainllama/run/json_schema_parts.h"

namespace plainllama {

namespace {

using json = nlohmann::ordered_json;

// Rules every grammar may use, written once on first use. `ws` is the whitespace between tokens: bounded, so a model
// cannot go on with spaces forever. A \u escape is any code point but a lone surrogate.
const std::map<std::string, std::string> kPrims = {
    {"ws", "(\" \" | \"\\n\" [ \\t]{0,16})?"},
    {"char",
     "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] "
     "[0-9a-fA-F]{2}))"},
    {"string", "\"\\\"\" char* \"\\\"\""},
    {"integer", "\"-\"? (\"0\" | [1-9] [0-9]{0,15})"},
    {"number", "integer (\".\" [0-9]{1,16})? ([eE] [\\-+]? [0-9]{1,2})?"},
    {"boolean", "\"true\" | \"false\""},
    {"null", "\"null\""},
    {"value", "object | array | string | number | boolean | null"},
    {"object", "\"{\" ws (member (ws \",\" ws member)* ws)? \"}\""},
    {"member", "string ws \":\" ws value"},
    {"array", "\"[\" ws (value (ws \",\" ws value)* ws)? \"]\""},
};
// The rules each rule above uses.
const std::map<std::string, std::vector<std::string>> kPrimUses = {
    {"string", {"char"}},
    {"number", {"integer"}},
    {"value", {"object", "array", "string", "number", "boolean", "null"}},
    {"object", {"ws", "member"}},
    {"member", {"string", "ws", "value"}},
    {"array", {"ws", "value"}},
};

const std::set<std::string> kAnnotations = {"title",    "description", "examples", "default", "deprecated",
                                            "readOnly", "writeOnly",   "$schema",  "$id",     "$comment"};
const std::map<std::string, std::string> kTypeOf = {  // validation keyword -> the type it applies to
    {"properties", "object"},
    {"required", "object"},
    {"additionalProperties", "object"},
    {"items", "array"},
    {"minItems", "array"},
    {"maxItems", "array"},
    {"minLength", "string"},
    {"maxLength", "string"},
    {"pattern", "string"},
    {"format", "string"},
    {"minimum", "number"},
    {"maximum", "number"},
    {"exclusiveMinimum", "number"},
    {"exclusiveMaximum", "number"}};
const std::set<std::string> kOther = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "nullable"};
const std::vector<std::string> kTypes = {"object", "array", "string", "number", "integer", "boolean", "null"};

constexpr int64_t kMaxCount = 10000;  // the largest minItems, maxItems, minLength, maxLength
constexpr int kMaxSchemaDepth = 200;  // schemas within schemas

std::string kind_of(const json& v) {
    return v.is_object()    ? "an object"
           : v.is_array()   ? "an array"
           : v.is_string()  ? "a string"
           : v.is_boolean() ? "a boolean"
           : v.is_number()  ? "a number"
                            : "null";
}

// "x{lo,hi}" in GBNF; hi < 0 is unbounded; "" when it can only be empty.
std::string repeat(const std::string& x, int64_t lo, int64_t hi) {
    if (hi == 0) return "";
    if (hi < 0) return lo == 0 ? x + "*" : lo == 1 ? x + "+" : x + "{" + std::to_string(lo) + ",}";
    if (lo == hi) return lo == 1 ? x : x + "{" + std::to_string(lo) + "}";
    if (lo == 0 && hi == 1) return x + "?";
    return x + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

std::string sanitized(const std::string& s) {
    std::string r;
    for (unsigned char c : s) {
        const bool ok = std::isalnum(c) != 0;
        if (ok)
            r += char(c);
        else if (!r.empty() && r.back() != '-')
            r += '-';
    }
    while (!r.empty() && r.back() == '-') r.pop_back();
    return r.empty() ? "x" : r;
}

class Compiler {
   public:
    explicit Compiler(const json& root) : root_(root) {
        for (const auto& [name, body] : kPrims) names_.insert(name);
    }
    std::string run();
    std::string run_object();

   private:
    const json& root_;
    std::vector<std::pair<std::string, std::string>> rules_;  // name, body: in the order made
    std::set<std::string> names_;
    std::set<std::string> prims_used_;
    std::map<std::string, std::string> refs_;  // "$ref" -> its rule
    int depth_ = 0;                            // schemas within schemas being compiled

    [[noreturn]] void fail(const std::string& path, const std::string& what) const {
        throw SchemaError("schema" + (path.empty() ? std::string() : " at " + path) + ": " + what);
    }
    std::string fresh(const std::string& hint) {
        std::string n = sanitized(hint);
        for (int k = 2; names_.count(n); ++k) n = sanitized(hint) + "-" + std::to_string(k);
        names_.insert(n);
        return n;
    }
    std::string rule(const std::string& hint, const std::string& body) {
        if (body.find_first_of(" ()|\"[") == std::string::npos && !body.empty()) return body;  // a rule name
        const std::string n = fresh(hint);
        rules_.push_back({n, body});
        return n;
    }
    std::string prim(const std::string& name) {
        if (prims_used_.insert(name).second)
            if (auto it = kPrimUses.find(name); it != kPrimUses.end())
                for (const std::string& u : it->second) prim(u);
        return name;
    }
    std::string text() const;
    std::string value(const json& s, const std::string& path, const std::string& hint);
    std::string ref(const json& r, const std::string& path);
    std::string enumeration(const json& s, const std::string& path, const std::vector<std::string>& types);
    std::string string_(const json& s, const std::string& path);
    std::string number_(const json& s, const std::string& path, bool integer);
    std::string object_(const json& s, const std::string& path, const std::string& hint);
    std::string array_(const json& s, const std::string& path, const std::string& hint);
    std::string key_except(const std::vector<std::string>& names, const std::string& hint);
    int64_t count(const json& s, const char* key, const std::string& path, int64_t dflt);
};

std::string Compiler::text() const {
    std::string t;
    for (const auto& [n, b] : rules_) t += n + " ::= " + b + "\n";
    for (const std::string& p : prims_used_) t += p + " ::= " + kPrims.at(p) + "\n";
    return t;
}

std::string Compiler::run() {
    names_.insert("root");
    rules_.push_back({"root", ""});
    const std::string body = value(root_, "", "root");
    rules_[0].second = body;
    return text();
}

std::string Compiler::run_object() {
    rules_.push_back({"root", prim("object")});
    return text();
}

int64_t Compiler::count(const json& s, const char* key, const std::string& path, int64_t dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        fail(path + "/" + key, "expected a non-negative integer, got " + kind_of(v));
    if (v.get<uint64_t>() > uint64_t(kMaxCount))
        fail(path + "/" + key, "at most " + std::to_string(kMaxCount) + " is supported, got " + v.dump());
    return v.get<int64_t>();
}

std::string Compiler::value(const json& s, const std::string& path, const std::string& hint) {
    struct Depth {  // the compiler recurses on each nested schema
        int& d;
        explicit Depth(int& x) : d(++x) {}
        ~Depth() { --d; }
    } depth(depth_);
    if (depth_ > kMaxSchemaDepth) fail(path, "schemas nest deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
    if (s.is_boolean()) {
        if (s.get<bool>()) return prim("value");
        fail(path, "the schema false allows no value");
    }
    if (!s.is_object()) fail(path, "expected a schema (an object, true or false), got " + kind_of(s));
    std::vector<std::string> checks;  // the keywords that constrain the value
    for (const auto& [k, v] : s.items()) {
        if (kAnnotations.count(k) || k == "$defs" || k == "definitions") continue;
        if (!kTypeOf.count(k) && !kOther.count(k)) fail(path, "unsupported keyword \"" + k + "\"");
        checks.push_back(k);
    }
    bool nullable = false;
    if (s.contains("nullable")) {
        if (!s["nullable"].is_boolean())
            fail(path + "/nullable", "expected true or false, got " + kind_of(s["nullable"]));
        nullable = s["nullable"].get<bool>();
    }
    auto only = [&](std::initializer_list<const char*> allowed, const std::string& what) {
        for (const std::string& k : checks)
            if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }))
                fail(path, what + " with \"" + k + "\" beside it is not supported");
    };
    std::string body;
    if (s.contains("$ref")) {
        only({"$ref", "nullable"}, "\"$ref\"");
        body = ref(s["$ref"], path + "/$ref");
    } else if (s.contains("anyOf") || s.contains("oneOf") || s.contains("allOf")) {
        const std::string k = s.contains("anyOf") ? "anyOf" : s.contains("oneOf") ? "oneOf" : "allOf";
        only({k.c_str(), "nullable"}, "\"" + k + "\"");
        const json& list = s[k];
        if (!list.is_array() || list.empty()) fail(path + "/" + k, "expected a non-empty array of schemas");
        if (k == "allOf" && list.size() != 1)
            fail(path + "/allOf", "allOf of more than one schema is not supported (only a single schema)");
        for (size_t i = 0; i < list.size(); ++i)
            body += (i ? " | " : "") + value(list[i], path + "/" + k + "/" + std::to_string(i), hint);
    } else {
        std::vector<std::string> types;
        if (s.contains("type")) {
            const json& t = s["type"];
            if (!t.is_string() && !t.is_array()) fail(path + "/type", "expected a type name or a list of them");
            for (const json& x : t.is_string() ? json::array({t}) : t) {
                if (!x.is_string() || std::find(kTypes.begin(), kTypes.end(), x.get<std::string>()) == kTypes.end())
                    fail(path + "/type", "unknown type " + x.dump() +
                                             " (expected object, array, string, number, integer, boolean or null)");
                if (std::find(types.begin(), types.end(), x.get<std::string>()) == types.end())
                    types.push_back(x.get<std::string>());
            }
            if (types.empty()) fail(path + "/type", "an empty list of types allows no value");
        } else {  // no type: the types the keywords are about (none: any value)
            for (const std::string& k : checks)
                if (auto it = kTypeOf.find(k);
                    it != kTypeOf.end() && std::find(types.begin(), types.end(), it->second) == types.end())
                    types.push_back(it->second);
        }
        if (nullable && !types.empty() && std::find(types.begin(), types.end(), "null") == types.end())
            types.push_back("null");
        if (std::find(types.begin(), types.end(), "number") != types.end())
            std::erase(types, std::string("integer"));  // integers are numbers
        for (const std::string& k : checks) {
            auto it = kTypeOf.find(k);
            if (it == kTypeOf.end() || types.empty()) continue;
            const bool applies = std::any_of(types.begin(), types.end(), [&](const std::string& t) {
                return t == it->second || (t == "integer" && it->second == "number");
            });
            if (!applies) fail(path, "\"" + k + "\" does not apply to type " + s.value("type", json()).dump());
        }
        if (s.contains("enum") || s.contains("const")) {
            for (const std::string& k : checks)
                if (k != "enum" && k != "const" && k != "type" && k != "nullable")
                    fail(path, "\"" + std::string(s.contains("enum") ? "enum" : "const") + "\" with \"" + k +
                                   "\" beside it is not supported (only \"type\")");
            body = enumeration(s, path, types);  // nullable: null is one more value
        } else if (types.empty()) {
            body = prim("value");
            nullable = false;  // null is a value
        } else {
            for (const std::string& t : types) {
                std::string b;
                if (t == "string")
                    b = string_(s, path);
                else if (t == "number" || t == "integer")
                    b = number_(s, path, t == "integer");
                else if (t == "object")
                    b = object_(s, path, hint);
                else if (t == "array")
                    b = array_(s, path, hint);
                else
                    b = prim(t);  // boolean, null
                body += (body.empty() ? "" : " | ") + rule(hint + "-" + t, b);
            }
            nullable = false;  // "null" is among the types already
        }
    }
    if (nullable) body = "(" + body + ") | " + prim("null");
    return rule(hint, body);
}

std::string Compiler::ref(const json& r, const std::string& path) {
    if (!r.is_string()) fail(path, "expected a string, got " + kind_of(r));
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#')
        fail(path, "\"" + target + "\": only references within the schema (\"#/$defs/...\") are supported");
    const json* t = nullptr;
    try {
        const json::json_pointer ptr(target.substr(1));
        if (root_.contains(ptr)) t = &root_.at(ptr);
    } catch (const json::exception&) {
    }
    if (!t) fail(path, "\"" + target + "\" points to nothing in the schema");
    // The rule's name is taken before the schema is compiled: a recursive schema refers back to it.
    const std::string name = fresh(target == "#" ? "root-ref" : target.substr(target.rfind('/') + 1));
    refs_[target] = name;
    const size_t at = rules_.size();
    rules_.push_back({name, ""});
    const std::string body = value(*t, target.substr(1), name);
    rules_[at].second = body;
    return name;
}

std::string Compiler::enumeration(const json& s, const std::string& path, const std::vector<std::string>& types) {
    if (s.contains("enum") && s.contains("const")) fail(path, "both \"enum\" and \"const\": give one");
    json values;
    if (s.contains("const")) {
        values = json::array({s["const"]});
    } else {
        values = s["enum"];
        if (!values.is_array() || values.empty()) fail(path + "/enum", "expected a non-empty array of values");
    }
    auto type_ok = [&](const json& v) {
        if (types.empty()) return true;
        for (const std::string& t : types) {
            if ((t == "string" && v.is_string()) || (t == "number" && v.is_number()) ||
                (t == "integer" &&
                 (v.is_number_integer() || (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>()))) ||
                (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null()) ||
                (t == "object" && v.is_object()) || (t == "array" && v.is_array()))
                return true;
        }
        return false;
    };
    std::string body;
    for (const json& v : values) {
        if (!type_ok(v)) continue;
        body += (body.empty() ? "" : " | ") + gbnf_literal(v.dump());
    }
    if (body.empty()) fail(path, "no value of the enum has the type " + s.value("type", json()).dump());
    return body;
}

std::string Compiler::string_(const json& s, const std::string& path) {
    const std::string quote = "\"\\\"\"";
    if (s.contains("format")) {
        if (!s["format"].is_string()) fail(path + "/format", "expected a string, got " + kind_of(s["format"]));
        const std::string f = s["format"].get<std::string>();
        for (const char* k : {"pattern", "minLength", "maxLength"})
            if (s.contains(k)) fail(path, "\"format\" with \"" + std::string(k) + "\" beside it is not supported");
        const auto g = format_gbnf(f);
        if (!g) fail(path + "/format", "format \"" + f + "\" is not supported (date, time, date-time and uuid are)");
        return quote + " " + *g + " " + quote;
    }
    if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) fail(path + "/pattern", "expected a string, got " + kind_of(s["pattern"]));
        for (const char* k : {"minLength", "maxLength"})
            if (s.contains(k)) fail(path, "\"pattern\" with \"" + std::string(k) + "\" beside it is not supported");
        try {
            return quote + " " + pattern_gbnf(s["pattern"].get<std::string>()) + " " + quote;
        } catch (const SchemaError&) {
            throw;
        } catch (const Error& e) {
            fail(path + "/pattern", e.what());
        }
    }
    const int64_t lo = count(s, "minLength", path, 0), hi = count(s, "maxLength", path, -1);
    if (hi >= 0 && hi < lo) fail(path, "maxLength " + std::to_string(hi) + " is below minLength " + std::to_string(lo));
    const std::string chars = repeat(prim("char"), lo, hi);
    return quote + (chars.empty() ? "" : " " + chars) + " " + quote;
}

std::string Compiler::number_(const json& s, const std::string& path, bool integer) {
    std::optional<Decimal> lo, hi;
    auto bound = [&](const char* key, bool upper, bool exclusive) {
        if (!s.contains(key)) return;
        const json& v = s[key];
        if (v.is_boolean()) {  // draft 4: exclusiveMinimum: true makes minimum exclusive
            if (!exclusive) fail(path + "/" + key, "expected a number, got a boolean");
            return;
        }
        if (!v.is_number()) fail(path + "/" + key, "expected a number, got " + kind_of(v));
        const char* excl = upper ? "exclusiveMaximum" : "exclusiveMinimum";
        if (!exclusive && s.contains(excl) && s[excl].is_boolean() && s[excl].get<bool>()) exclusive = true;
        Decimal d = v.is_number_float() ? decimal_of(v.get<double>()) : *parse_decimal(v.dump());
        if (integer) {
            d = upper ? (exclusive ? minus_one(ceil(d)) : floor(d)) : (exclusive ? plus_one(floor(d)) : ceil(d));
        } else if (exclusive) {
            // Past the midpoint between the bound and the next double on the allowed side, so that a value read as a
            // double compares strictly too; at most 16 fraction digits, so the grammar stays short (x > 0: 1e-16).
            const double b = v.get<double>(), next = std::nextafter(b, upper ? -INFINITY : INFINITY);
            d = beyond(exact_decimal((static_cast<long double>(b) + next) / 2), 16, !upper);
        }
        std::optional<Decimal>& b = upper ? hi : lo;
        if (!b || (upper ? compare(d, *b) < 0 : compare(d, *b) > 0)) b = d;
    };
    bound("minimum", false, false);
    bound("exclusiveMinimum", false, true);
    bound("maximum", true, false);
    bound("exclusiveMaximum", true, true);
    if (lo && hi && compare(*lo, *hi) > 0)
        fail(path, std::string("no ") + (integer ? "integer" : "number") + " is within the bounds (at least " +
                       to_string(*lo) + " and at most " + to_string(*hi) + ")");
    if (!lo && !hi) return prim(integer ? "integer" : "number");
    return integer ? integer_range_gbnf(lo, hi) : decimal_range_gbnf(lo, hi);
}

// Object keys (without escapes) other than `names`: a prefix tree of the names, leaving each node by any character
// but the names' next ones, or ending where no name ends.
std::string Compiler::key_except(const std::vector<std::string>& names, const std::string& hint) {
    const std::string kc = "[^\"\\\\\\x00-\\x1F]";
    struct Node {
        std::map<std::string, size_t> next;  // a UTF-8 character -> child
        bool name_ends = false;
    };
    std::vector<Node> t(1);
    for (const std::string& n : names) {
        if (n.find_first_of(std::string("\"\\") + std::string(1, '\0')) != std::string::npos ||
            std::any_of(n.begin(), n.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
            continue;  // a key written without escapes can never be this name
        size_t at = 0;
        for (size_t i = 0; i < n.size();) {
            size_t len = 1;
            while (i + len < n.size() && (static_cast<unsigned char>(n[i + len]) & 0xC0) == 0x80) ++len;
            const std::string c = n.substr(i, len);
            auto it = t[at].next.find(c);
            if (it == t[at].next.end()) {
                t.push_back({});
                it = t[at].next.emplace(c, t.size() - 1).first;
            }
            at = it->second;
            i += len;
        }
        t[at].name_ends = true;
    }
    std::vector<std::string> rule_of(t.size());
    for (size_t i = 0; i < t.size(); ++i) rule_of[i] = fresh(hint + "-key");
    for (size_t i = 0; i < t.size(); ++i) {
        std::string body, excluded;
        for (const auto& [c, child] : t[i].next) {
            body += (body.empty() ? "" : " | ") + gbnf_literal(c) + " " + rule_of[child];
            uint32_t cp = static_cast<unsigned char>(c[0]);
            if (c.size() > 1) {
                cp &= 0x7Fu >> c.size();
                for (size_t k = 1; k < c.size(); ++k) cp = cp << 6 | (static_cast<unsigned char>(c[k]) & 0x3F);
            }
            excluded += cp < 0x10000 ? "\\u" : "\\U";
            char buf[12];
            std::snprintf(buf, sizeof buf, cp < 0x10000 ? "%04X" : "%08X", cp);
            excluded += buf;
        }
        body += (body.empty() ? "" : " | ") + ("[^\"\\\\\\x00-\\x1F" + excluded + "] " + kc + "*");
        if (!t[i].name_ends) body = "| " + body;  // may end here (first: a '|' at the end of a line goes on)
        rules_.push_back({rule_of[i], body});
    }
    return "\"\\\"\" " + rule_of[0] + " \"\\\"\"";
}

std::string Compiler::object_(const json& s, const std::string& path, const std::string& hint) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) fail(path + "/properties", "expected an object of schemas, got " + kind_of(props));
    std::set<std::string> required;
    if (s.contains("required")) {
        const json& r = s["required"];
        if (!r.is_array()) fail(path + "/required", "expected an array of property names, got " + kind_of(r));
        for (const json& k : r) {
            if (!k.is_string()) fail(path + "/required", "expected property names (strings), got " + kind_of(k));
            if (!props.contains(k.get<std::string>()))
                fail(path + "/required", "\"" + k.get<std::string>() + "\" is not in \"properties\"");
            required.insert(k.get<std::string>());
        }
    }
    // Other properties: when additionalProperties says so, or when it is absent and no property is listed.
    std::string extra_kv;
    const json ap = s.contains("additionalProperties") ? s["additionalProperties"] : json(props.empty());
    if (!ap.is_boolean() && !ap.is_object())
        fail(path + "/additionalProperties", "expected true, false or a schema, got " + kind_of(ap));
    if (!(ap.is_boolean() && !ap.get<bool>())) {
        std::vector<std::string> names;
        for (const auto& [k, v] : props.items()) names.push_back(k);
        const std::string key = names.empty() ? prim("string") : key_except(names, hint + "-other");
        const std::string val =
            ap.is_boolean() ? prim("value") : value(ap, path + "/additionalProperties", hint + "-other");
        extra_kv = rule(hint + "-other-kv", key + " " + prim("ws") + " \":\" " + prim("ws") + " " + val);
    }
    // Listed properties in their order, each required or optional, then any others: H(i) is a non-empty run of
    // members from the i-th on, T(i) what may follow a member from the i-th on (each with its comma).
    std::vector<std::string> kv;
    std::vector<bool> req;
    for (const auto& [k, v] : props.items()) {
        const std::string h = hint + "-" + k;
        const std::string val = value(v, path + "/properties/" + k, h);
        kv.push_back(
            rule(h + "-kv", gbnf_literal(json(k).dump()) + " " + prim("ws") + " \":\" " + prim("ws") + " " + val));
        req.push_back(required.count(k) > 0);
    }
    const size_t n = kv.size();
    const std::string comma = prim("ws") + " \",\" " + prim("ws") + " ";
    std::vector<std::string> tail(n + 1), head(n + 1);
    tail[n] = extra_kv.empty() ? "" : "(" + comma + extra_kv + ")*";
    if (!extra_kv.empty()) head[n] = rule(hint + "-others", extra_kv + " " + tail[n]);
    for (size_t i = n; i-- > 0;) {
        const std::string piece = req[i] ? comma + kv[i] : "(" + comma + kv[i] + ")?";
        tail[i] = tail[i + 1].empty() ? piece : rule(hint + "-after-" + std::to_string(i), piece + " " + tail[i + 1]);
        std::string h = kv[i] + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
        if (!req[i] && !head[i + 1].empty()) h += " | " + head[i + 1];
        head[i] = rule(hint + "-from-" + std::to_string(i), h);
    }
    const std::string ws = prim("ws");
    if (head[0].empty()) return "\"{\" " + ws + " \"}\"";
    if (std::find(req.begin(), req.end(), true) != req.end())
        return "\"{\" " + ws + " " + head[0] + " " + ws + " \"}\"";
    return "\"{\" " + ws + " (" + head[0] + " " + ws + ")? \"}\"";
}

std::string Compiler::array_(const json& s, const std::string& path, const std::string& hint) {
    if (s.contains("items") && s["items"].is_array())
        fail(path + "/items", "an array of schemas (tuple items) is not supported: give one schema");
    const std::string item = s.contains("items") ? value(s["items"], path + "/items", hint + "-item") : prim("value");
    const int64_t lo = count(s, "minItems", path, 0), hi = count(s, "maxItems", path, -1);
    if (hi >= 0 && hi < lo) fail(path, "maxItems " + std::to_string(hi) + " is below minItems " + std::to_string(lo));
    const std::string ws = prim("ws");
    if (hi == 0) return "\"[\" " + ws + " \"]\"";
    const std::string more =
        repeat("(" + ws + " \",\" " + ws + " " + item + ")", lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
    const std::string items = item + (more.empty() ? "" : " " + more) + " " + ws;
    return "\"[\" " + ws + " " + (lo > 0 ? items : "(" + items + ")?") + " \"]\"";
}

}  // namespace

std::string json_schema_value_to_gbnf(const nlohmann::ordered_json& schema) { return Compiler(schema).run(); }

std::string json_schema_to_gbnf(const std::string& schema_json) {
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(schema_json);
    } catch (const nlohmann::json::parse_error& e) {
        std::string what = e.what();
        if (const size_t p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
        throw SchemaError("schema: not valid JSON: " + what);
    }
    return json_schema_value_to_gbnf(j);
}

std::string json_object_gbnf() {
    const nlohmann::ordered_json none;
    return Compiler(none).run_object();
}

namespace {
std::shared_ptr<const Grammar> parsed(const std::string& gbnf) {
    try {
        return std::make_shared<const Grammar>(parse_gbnf(gbnf));
    } catch (const GrammarError& e) {
        const std::string what = e.what();
        if (what.find("left-recursive") != std::string::npos || what.find("matches no text") != std::string::npos)
            throw SchemaError(
                "schema: a $ref comes back to itself before any value is written, so no text can "
                "satisfy it (its grammar: " +
                what + ")");
        throw SchemaError("schema: its grammar cannot run: " + what);
    }
}
}  // namespace

std::shared_ptr<const Grammar> json_schema_grammar(const std::string& schema_json) {
    return parsed(json_schema_to_gbnf(schema_json));
}

std::shared_ptr<const Grammar> json_schema_value_grammar(const nlohmann::ordered_json& schema) {
    return parsed(json_schema_value_to_gbnf(schema));
}

}  // namespace plainllama
