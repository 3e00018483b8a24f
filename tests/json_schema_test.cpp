// JSON Schema -> GBNF, per feature: texts the grammar must accept and texts it must refuse; number ranges against
// every integer of a window and against exact decimal comparison; the errors for what is not supported.
#include "plainllama/run/json_schema.h"

#include <gtest/gtest.h>

#include <random>

#include "plainllama/run/grammar_matcher.h"
#include "plainllama/run/json_schema_parts.h"
#include "test_util.h"

namespace plainllama::json_schema_test {  // named: the test files compile in unity batches

using test::HasSubstr;

bool sentence(const std::shared_ptr<const Grammar>& g, const std::string& text) {
    GrammarMatcher m(g);
    const int32_t s = m.feed(m.start(), text);
    return s != GrammarMatcher::kDead && m.can_end(s);
}

// Checks every text of `yes` is accepted and every text of `no` refused by the schema's grammar.
void expect(const std::string& schema, const std::vector<std::string>& yes, const std::vector<std::string>& no) {
    const auto g = json_schema_grammar(schema);
    for (const std::string& t : yes) EXPECT_TRUE(sentence(g, t)) << schema << "\nshould accept: " << t;
    for (const std::string& t : no) EXPECT_FALSE(sentence(g, t)) << schema << "\nshould refuse: " << t;
}

std::string error_of(const std::string& schema) {
    try {
        json_schema_grammar(schema);
    } catch (const SchemaError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(JsonSchema, ObjectRequiredAndNoOthers) {
    expect(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
               "required": ["a", "b"], "additionalProperties": false})",
           {R"({"a":1,"b":"x"})", R"({ "a" : 1 , "b" : "x" })", "{\n  \"a\": 1,\n  \"b\": \"x\"\n}"},
           {R"({"a":1})", R"({"b":"x","a":1})", R"({"a":1,"b":"x","c":2})", R"({"a":1,"b":"x",})",
            R"({"a":"1","b":"x"})", R"( {"a":1,"b":"x"})", R"({"a":1,"b":"x"} )", R"({"a":1,"b":"x"}{)", ""});
}

TEST(JsonSchema, OptionalProperties) {
    // a required between optional ones: every subset that keeps a, in order, with commas only between members.
    expect(R"({"properties": {"x": {"type": "integer"}, "a": {"type": "integer"}, "y": {"type": "integer"}},
               "required": ["a"]})",
           {R"({"a":1})", R"({"x":0,"a":1})", R"({"a":1,"y":2})", R"({"x":0,"a":1,"y":2})"},
           {R"({})", R"({"x":0})", R"({"y":2,"a":1})", R"({,"a":1})", R"({"a":1,})", R"({"x":0,,"a":1})"});
    expect(R"({"type": "object", "properties": {"p": {"type": "boolean"}, "q": {"type": "null"}}})",
           {R"({})", R"({ })", R"({"p":true})", R"({"q":null})", R"({"p":false,"q":null})"},
           {R"({,})", R"({"q":null,"p":true})", R"({"r":1})"});
}

TEST(JsonSchema, AdditionalProperties) {
    // Absent with no properties listed: any object.
    expect(R"({"type": "object"})", {R"({})", R"({"k":[1,{"z":null}],"":"v"})"}, {R"([])", R"({"k"})"});
    // true beside listed properties: others after them, never a listed name again.
    expect(R"({"properties": {"a": {"type": "integer"}, "ab": {"type": "integer"}}, "required": ["a"],
               "additionalProperties": true})",
           {R"({"a":1})", R"({"a":1,"abc":2})", R"({"a":1,"b":"x","":null})", R"({"a":1,"ab":2,"A":[]})",
            R"({"a":1,"é":0})"},
           {R"({"a":1,"a":2})", R"({"a":1,"ab":2,"ab":3})", R"({"a":1,"b\"":2})"});
    // A schema for the others.
    expect(R"({"type": "object", "additionalProperties": {"type": "integer"}})", {R"({"x":1,"y":-2})", R"({})"},
           {R"({"x":"1"})"});
    expect(R"({"type": "object", "properties": {}, "additionalProperties": false})", {R"({})"}, {R"({"a":1})"});
}

TEST(JsonSchema, Arrays) {
    expect(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
           {"[1,2]", "[ 1 , 2 , 3 ]", "[1,\n2]"}, {"[]", "[1]", "[1,2,3,4]", "[1,\"2\"]", "[1,2,]"});
    expect(R"({"type": "array", "items": {"type": "string"}})", {"[]", R"(["a"])", R"(["a","b","c","d"])"}, {"[,]"});
    expect(R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"});
    expect(R"({"type": "array"})", {R"([1,"a",null,[{}]])"}, {"[1,]"});
    expect(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1})", {"[true]", "[true,false]"}, {"[]"});
}

TEST(JsonSchema, Strings) {
    expect(R"({"type": "string"})", {R"("")", R"("a b")", R"("\"\\\/\b\f\n\r\t")", R"("\u00e9\uFFFF")", "\"é😀\""},
           {R"("\ud800")", "\"a\nb\"", R"("\x")", R"("\u12")", R"("abc)", "'a'"});
    // Lengths count characters: an escape is one, a multi-byte character is one.
    expect(R"({"type": "string", "minLength": 2, "maxLength": 3})",
           {R"("ab")", R"("abc")", R"("\n\t")", "\"éé\"", R"("\u0041bc")"}, {R"("a")", R"("abcd")", "\"é\"", R"("")"});
}

TEST(JsonSchema, Formats) {
    expect(R"({"type": "string", "format": "date"})",
           {R"("2024-02-29")", R"("2000-02-29")", R"("1999-12-31")", R"("2023-04-30")", R"("2023-01-31")"},
           {R"("2023-02-29")", R"("1900-02-29")", R"("2023-04-31")", R"("2023-13-01")", R"("2023-00-10")",
            R"("2023-01-00")", R"("2023-1-01")", R"("0999-01-01")"});
    expect(R"({"type": "string", "format": "time"})",
           {R"("23:59:59Z")", R"("00:00:00.123+05:30")", R"("12:30:00-01:00")"},
           {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:30:00")", R"("12:30Z")"});
    expect(R"({"type": "string", "format": "date-time"})", {R"("2024-02-29T12:00:00Z")"},
           {R"("2024-02-29 12:00:00Z")", R"("2024-02-29")"});
    expect(R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
           {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400")"});
}

TEST(JsonSchema, Patterns) {
    expect(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"},
           {R"("AB-12")", R"("ab-123")", R"("xAB-123")", R"("AB-1234")"});
    // Unanchored: the match may be anywhere.
    expect(R"({"type": "string", "pattern": "ab+c"})", {R"("abc")", R"("xxabbbcyy")"}, {R"("ac")", R"("")"});
    expect(R"({"type": "string", "pattern": "^(cat|dog)s?$"})", {R"("cat")", R"("dogs")"}, {R"("cats!")", R"("bird")"});
    // Characters JSON escapes: a quote, a backslash, a newline, in the value.
    expect(R"({"type": "string", "pattern": "^\"\\\\\n$"})", {R"("\"\\\n")"}, {"\"\"\\\n\""});
    expect(R"({"type": "string", "pattern": "^[^a-z]+$"})", {R"("ABC")", R"("1\"2")", R"("\n")", "\"É\""}, {R"("aB")"});
    expect(R"({"type": "string", "pattern": "^.$"})", {R"("x")", "\"é\"", R"("\t")"}, {R"("\n")", R"("xy")"});
    expect(R"({"type": "string", "pattern": "^\\w+@\\w+\\.(com|org)$"})", {R"("me@host.org")"}, {R"("me@host.net")"});
    expect(R"({"type": "string", "pattern": "^(?:ab){2,3}$"})", {R"("abab")", R"("ababab")"}, {R"("ab")"});
    expect(R"({"type": "string", "pattern": "^\\S\\s\\D$"})", {R"("a x")", R"("a\tb")"}, {R"("  x")", R"("a 1")"});
}

TEST(JsonSchema, Integers) {
    expect(R"({"type": "integer"})", {"0", "-7", "1234567890123456"},
           {"-0.5", "1.0", "01", "12345678901234567", "+1", "1e3"});
    expect(R"({"type": "integer", "minimum": -5, "maximum": 12})", {"-5", "0", "9", "10", "12"},
           {"-6", "13", "-0.0", "010", "100"});
    expect(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100})", {"1", "99"}, {"0", "100", "-1"});
    expect(R"({"type": "integer", "minimum": 1.5, "maximum": 3.5})", {"2", "3"}, {"1", "4"});
    expect(R"({"type": "integer", "minimum": 1000})", {"1000", "99999999999"}, {"999", "-1000"});
    expect(R"({"type": "integer", "maximum": -3})", {"-3", "-4000"}, {"-2", "0", "3"});
}

TEST(JsonSchema, Numbers) {
    expect(R"({"type": "number"})", {"0", "-1.5", "3e10", "2.5E-3", "-0.0"}, {".5", "1.", "--1", "1e", "NaN"});
    expect(R"({"type": "number", "minimum": 0.5, "exclusiveMaximum": 2})", {"0.5", "0.50", "1", "1.999", "0.75"},
           {"0.49", "2", "2.0", "2.0001", "1e0", "-1"});
    expect(R"({"type": "number", "minimum": -1, "maximum": 1})", {"-1", "-0.5", "0", "0.999", "1", "1.000"},
           {"-1.01", "1.01", "2"});
    expect(R"({"type": "number", "exclusiveMinimum": 0})", {"0.1", "5", "0.0001"}, {"0", "0.0", "-0.1"});
}

TEST(JsonSchema, BooleansNullsAndNullable) {
    expect(R"({"type": "boolean"})", {"true", "false"}, {"1", "null", "True"});
    expect(R"({"type": "null"})", {"null"}, {"0"});
    expect(R"({"type": ["string", "null"]})", {R"("a")", "null"}, {"1"});
    expect(R"({"type": "integer", "nullable": true})", {"1", "null"}, {R"("1")"});
    expect(R"({"enum": ["a", "b"], "nullable": true})", {R"("a")", "null"}, {R"("c")"});
}

TEST(JsonSchema, EnumAndConst) {
    expect(R"({"enum": ["red", 1, null, true, {"a": [1, 2]}, [1], "q\"uote"]})",
           {R"("red")", "1", "null", "true", R"({"a":[1,2]})", "[1]", R"("q\"uote")"},
           {R"("blue")", "2", "false", R"({"a": [1, 2]})", R"("red" )"});
    expect(R"({"const": "only"})", {R"("only")"}, {R"("other")"});
    expect(R"({"type": "string", "enum": ["a", 1]})", {R"("a")"}, {"1"});  // the type filters the values
}

TEST(JsonSchema, AnyOfOneOfAllOf) {
    expect(R"({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}]})", {R"("a")", "7"},
           {R"("ab")", "1.5"});
    expect(R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})", {"true", "null"}, {"0"});
    expect(R"({"allOf": [{"type": "integer"}], "description": "pydantic writes these"})", {"3"}, {R"("3")"});
}

TEST(JsonSchema, RefsAndRecursion) {
    expect(R"({"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
                                "additionalProperties": false}},
               "type": "array", "items": {"$ref": "#/$defs/pt"}})",
           {R"([{"x":1},{"x":2}])"}, {R"([{"y":1}])"});
    expect(R"({"definitions": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/definitions/s"}},
               "required": ["a"]})",
           {R"({"a":"z"})"}, {R"({"a":1})"});
    // A tree: a node refers to itself through its children.
    expect(R"({"$defs": {"node": {"type": "object",
                                  "properties": {"v": {"type": "integer"},
                                                 "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                                  "required": ["v", "kids"], "additionalProperties": false}},
               "$ref": "#/$defs/node"})",
           {R"({"v":1,"kids":[]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]})"},
           {R"({"v":1,"kids":[{"v":2}]})"});
    // "#": the root again.
    expect(R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
               "required": ["next"]})",
           {R"({"next":null})", R"({"next":{"next":null}})"}, {R"({"next":{}})"});
    // A name with characters a rule name cannot have, and a JSON pointer escape (~1 is '/').
    expect(R"({"$defs": {"a b/c": {"type": "boolean"}}, "$ref": "#/$defs/a b~1c"})", {"true"}, {"1"});
}

TEST(JsonSchema, AnyValueAndJsonObject) {
    expect("{}", {"1", R"("s")", R"({"a":[null]})", "[]"}, {"", "[", "nul"});
    expect("true", {"false", "{}"}, {"}"});
    const auto g = std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf()));
    for (const char* t : {"{}", R"({"a":1})", R"({"a":{"b":[1,2,{"c":"d"}]},"e":-1.5e3})"})
        EXPECT_TRUE(sentence(g, t)) << t;
    for (const char* t : {"[]", "1", R"("a")", R"({"a":1} )", R"({'a':1})", R"({"a":1,})", "null"})
        EXPECT_FALSE(sentence(g, t)) << t;
}

TEST(JsonSchema, Annotations) {
    expect(R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "$comment": "c",
               "title": "T", "description": "D", "examples": [1], "default": 1, "deprecated": false,
               "readOnly": false, "writeOnly": false, "type": "integer"})",
           {"1"}, {"\"1\""});
}

// Whitespace: nothing, one space, or a newline and up to 16 spaces or tabs between tokens; none around the value.
TEST(JsonSchema, BoundedWhitespace) {
    const std::string s = R"({"type": "array", "items": {"type": "integer"}})";
    expect(s, {"[1,2]", "[ 1, 2 ]", "[\n1,\n\t\t2\n]", "[\n" + std::string(16, ' ') + "1]"},
           {"[  1]", "[\n" + std::string(17, ' ') + "1]", "[\n\n1]", " [1]", "[1]\n", "[\r\n1]"});
}

TEST(JsonSchema, Errors) {
    struct Case {
        const char* schema;
        const char* error;
    };
    const Case cases[] = {
        {R"({"type": "integer", "multipleOf": 3})", "schema: unsupported keyword \"multipleOf\""},
        {R"({"properties": {"a": {"type": "array", "uniqueItems": true}}})",
         "schema at /properties/a: unsupported keyword \"uniqueItems\""},
        {R"({"type": "object", "patternProperties": {}})", "unsupported keyword \"patternProperties\""},
        {R"({"type": "array", "prefixItems": []})", "unsupported keyword \"prefixItems\""},
        {R"({"not": {"type": "string"}})", "unsupported keyword \"not\""},
        {R"({"if": {}, "then": {}})", "unsupported keyword \"if\""},
        {R"({"type": "object", "minProperties": 1})", "unsupported keyword \"minProperties\""},
        {R"({"type": "strin"})", "schema at /type: unknown type \"strin\""},
        {R"({"type": "string", "format": "email"})", "schema at /format: format \"email\" is not supported"},
        {R"j({"type": "string", "pattern": "^(?=a)"})j", "schema at /pattern: pattern \"^(?=a)\": lookaround"},
        {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
        {R"({"type": "string", "pattern": "\\bword"})", "word boundaries"},
        {R"({"type": "string", "pattern": "a$b"})", "'^' and '$' are supported only at the start and the end"},
        {R"({"type": "string", "pattern": "[a-"})", "a '[' without its ']'"},
        {R"({"type": "string", "pattern": "a{2"})", "'{' must start a quantifier"},
        {R"({"type": "string", "pattern": "^a", "maxLength": 3})", "\"pattern\" with \"maxLength\" beside it"},
        {R"({"properties": {"a": {}}, "required": ["b"]})", "schema at /required: \"b\" is not in \"properties\""},
        {R"({"$ref": "#/$defs/missing"})", "schema at /$ref: \"#/$defs/missing\" points to nothing"},
        {R"({"$ref": "https://example.com/s.json"})", "only references within the schema"},
        {R"({"type": "integer", "minimum": 5, "maximum": 4})", "no integer is within the bounds"},
        {R"({"type": "integer", "exclusiveMinimum": 4, "exclusiveMaximum": 5})", "no integer is within the bounds"},
        {R"({"type": "number", "minimum": "1"})", "schema at /minimum: expected a number, got a string"},
        {R"({"type": "string", "enum": ["a"], "minLength": 1})", "\"enum\" with \"minLength\" beside it"},
        {R"({"anyOf": [{"type": "string"}], "type": "object"})", "\"anyOf\" with \"type\" beside it is not supported"},
        {R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})", "allOf of more than one schema"},
        {R"({"type": "array", "items": [{"type": "string"}]})", "tuple items"},
        {R"({"type": "string", "minimum": 1})", "\"minimum\" does not apply to type \"string\""},
        {R"({"type": "array", "maxItems": 1, "minItems": 2})", "maxItems 1 is below minItems 2"},
        {R"({"type": "string", "maxLength": 100000})", "schema at /maxLength: at most 10000 is supported"},
        {R"({"type": "string", "maxLength": -1})", "expected a non-negative integer"},
        {R"({"type": ["string", 1]})", "unknown type 1"},
        {R"({"enum": []})", "schema at /enum: expected a non-empty array"},
        {R"({"type": "integer", "enum": ["a"]})", "no value of the enum has the type \"integer\""},
        {"false", "schema: the schema false allows no value"},
        {"[1]", "expected a schema (an object, true or false), got an array"},
        {R"({"type": "object", "properties": {"a": false}})", "schema at /properties/a: the schema false"},
        {R"({"type": "object", "additionalProperties": 1})", "expected true, false or a schema"},
        {"{\"type\": ", "schema: not valid JSON"},
        {R"({"$ref": "#"})", "schema: a $ref comes back to itself before any value is written"},
        {R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})",
         "a $ref comes back to itself"},
        {R"({"$ref": 1})", "schema at /$ref: expected a string"},
        {R"({"$ref": "#/$defs/a", "type": "string"})", "\"$ref\" with \"type\" beside it is not supported"},
    };
    for (const Case& c : cases) EXPECT_TRUE(HasSubstr(error_of(c.schema), c.error)) << c.schema;
}

// Patterns from a client: a grammar or an error about the pattern, never a grammar that does not parse.
TEST(JsonSchema, RandomPatternsCompileOrAreRefused) {
    std::mt19937 rng(3);
    const std::string alphabet = "ab^$.|()[]{}*+?\\-,0129dwsSbu\"\xC3\xA9:<=!";
    int compiled = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string p;
        for (int k = int(rng() % 16); k > 0; --k) p += alphabet[rng() % alphabet.size()];
        nlohmann::ordered_json schema = {{"type", "string"}, {"pattern", p}};
        try {
            const auto g = json_schema_value_grammar(schema);
            GrammarMatcher m(g);
            m.feed(m.start(), "\"ab0\"");
            ++compiled;
        } catch (const SchemaError& e) {
            ASSERT_TRUE(test::StartsWith(e.what(), "schema at /pattern: pattern")) << p;
        }
    }
    EXPECT_GT(compiled, 1000);
}

// Nesting from a client: the compiler recurses on each level and stops at 200.
TEST(JsonSchema, DeepNestingIsAnError) {
    std::string deep;
    for (int i = 0; i < 5000; ++i) deep += R"({"type": "array", "items": )";
    deep += "{}" + std::string(5000, '}');
    EXPECT_TRUE(HasSubstr(error_of(deep), "schemas nest deeper than 200 levels"));
    std::string ok;
    for (int i = 0; i < 50; ++i) ok += R"({"type": "array", "items": )";
    ok += R"({"type": "integer"})" + std::string(50, '}');
    expect(ok, {std::string(50, '[') + "1" + std::string(50, ']'), std::string(50, '[') + std::string(50, ']')},
           {std::string(51, '[') + "1" + std::string(51, ']'), std::string(50, '[') + "\"1\"" + std::string(50, ']')});
}

// Integer ranges: every integer in a window, written canonically, is accepted exactly when it is in range; leading
// zeros and "-0" never are.
TEST(JsonSchema, IntegerRangesAgainstEveryInteger) {
    const std::vector<std::optional<int64_t>> bounds = {std::nullopt, -1000, -101, -100, -99, -10, -9,  -1, 0, 1, 7, 9,
                                                        10,           19,    99,   100,  101, 999, 1000};
    auto dec = [](std::optional<int64_t> v) -> std::optional<Decimal> {
        if (!v) return std::nullopt;
        return parse_decimal(std::to_string(*v));
    };
    for (const auto& lo : bounds)
        for (const auto& hi : bounds) {
            if (lo && hi && *lo > *hi) continue;
            const auto g =
                std::make_shared<const Grammar>(parse_gbnf("root ::= " + integer_range_gbnf(dec(lo), dec(hi))));
            GrammarMatcher m(g);
            for (int64_t x = -1100; x <= 1100; ++x) {
                const bool in = (!lo || x >= *lo) && (!hi || x <= *hi);
                const int32_t s = m.feed(m.start(), std::to_string(x));
                ASSERT_EQ(s != GrammarMatcher::kDead && m.can_end(s), in)
                    << x << " in [" << (lo ? std::to_string(*lo) : "-inf") << ", " << (hi ? std::to_string(*hi) : "inf")
                    << "]";
            }
            for (const char* bad : {"-0", "00", "01", "-01", "+1"}) {
                const int32_t s = m.feed(m.start(), bad);
                EXPECT_FALSE(s != GrammarMatcher::kDead && m.can_end(s)) << bad;
            }
        }
}

// Decimal ranges: random decimals with up to 4 fraction digits, compared exactly as integers scaled by 10^4.
TEST(JsonSchema, DecimalRangesAgainstExactComparison) {
    std::mt19937 rng(7);
    auto text_of = [](int64_t scaled, int frac_digits) {  // scaled / 10^4, written with frac_digits digits
        std::string s = std::to_string(std::llabs(scaled) / 10000);
        std::string f = std::to_string(std::llabs(scaled) % 10000);
        f = std::string(4 - f.size(), '0') + f;
        if (frac_digits > 0) s += "." + f.substr(0, size_t(frac_digits));
        return (scaled < 0 ? "-" : "") + s;
    };
    const std::vector<std::optional<int64_t>> bounds = {std::nullopt, -123450, -10000, -5000, -1,    0,      1,
                                                        2500,         9999,    10000,  10001, 99990, 100000, 123456};
    for (const auto& lo : bounds)
        for (const auto& hi : bounds) {
            if (lo && hi && *lo > *hi) continue;
            auto dec = [&](std::optional<int64_t> v) -> std::optional<Decimal> {
                if (!v) return std::nullopt;
                return parse_decimal(text_of(*v, 4));
            };
            const auto g =
                std::make_shared<const Grammar>(parse_gbnf("root ::= " + decimal_range_gbnf(dec(lo), dec(hi))));
            GrammarMatcher m(g);
            std::uniform_int_distribution<int64_t> pick(-200000, 200000);
            std::uniform_int_distribution<int> digits(0, 4);
            for (int i = 0; i < 3000; ++i) {
                int64_t x = i < 30 && lo ? *lo + (i % 3) - 1 : i < 60 && hi ? *hi + (i % 3) - 1 : pick(rng);
                const int fd = digits(rng);
                int64_t unit = 1;
                for (int k = fd; k < 4; ++k) unit *= 10;
                x = x / unit * unit;  // only fd fraction digits
                const bool in = (!lo || x >= *lo) && (!hi || x <= *hi);
                const std::string t = text_of(x, fd);
                const int32_t s = m.feed(m.start(), t);
                ASSERT_EQ(s != GrammarMatcher::kDead && m.can_end(s), in)
                    << t << " in [" << (lo ? text_of(*lo, 4) : "-inf") << ", " << (hi ? text_of(*hi, 4) : "inf") << "]";
            }
        }
}

TEST(JsonSchema, Decimals) {
    auto d = [](const char* s) { return to_string(*parse_decimal(s)); };
    EXPECT_EQ(d("-12.50"), "-12.5");
    EXPECT_EQ(d("1.5e-7"), "0.00000015");
    EXPECT_EQ(d("3E+2"), "300");
    EXPECT_EQ(d("-0.0"), "0");
    EXPECT_FALSE(parse_decimal("01").has_value());
    EXPECT_FALSE(parse_decimal("1.").has_value());
    EXPECT_FALSE(parse_decimal("1e999").has_value());
    EXPECT_EQ(to_string(decimal_of(0.1)), "0.1");
    EXPECT_EQ(to_string(ceil(*parse_decimal("-0.5"))), "0");
    EXPECT_EQ(to_string(floor(*parse_decimal("-0.5"))), "-1");
    EXPECT_EQ(to_string(minus_one(*parse_decimal("0"))), "-1");
    EXPECT_EQ(to_string(plus_one(*parse_decimal("-1"))), "0");
    EXPECT_EQ(to_string(plus_one(*parse_decimal("999"))), "1000");
    EXPECT_LT(compare(*parse_decimal("0.49"), *parse_decimal("0.5")), 0);
    EXPECT_GT(compare(*parse_decimal("-0.49"), *parse_decimal("-0.5")), 0);
}

}  // namespace plainllama::json_schema_test
