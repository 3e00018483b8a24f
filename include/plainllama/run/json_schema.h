// JSON Schema -> GBNF: a grammar whose sentences are JSON texts that validate against the schema, for what OpenAI's
// structured outputs accept (docs/structured-output.md has the subset, the policies and the errors):
//   type (one or a list, "null" among them), enum, const, anyOf, oneOf, allOf of one schema, $ref to any place in the
//   document ($defs, definitions, "#"), nullable;
//   object: properties, required, additionalProperties (false, true or a schema; when absent: none when properties
//   are listed, any when none are);
//   array: items, minItems, maxItems;  string: minLength, maxLength, pattern, format (date, time, date-time, uuid);
//   number and integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum.
// Annotations are allowed and have no effect: title, description, examples, default, deprecated, readOnly,
// writeOnly, $schema, $id, $comment. Any other keyword is a SchemaError naming it and where it is, never ignored.
//
// The texts are JSON with limited whitespace (none, a space, or a newline and up to 16 spaces or tabs between
// tokens; nothing before or after the value), so a model cannot spin on spaces, and the grammar ends with the value.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "plainllama/run/grammar.h"
#include "plainllama/sys/error.h"

namespace plainllama {

// A schema we cannot honour or that is malformed: "schema at /properties/age: unsupported keyword \"multipleOf\"".
class SchemaError : public Error {
   public:
    using Error::Error;
};

// The GBNF text for a schema (the text of a JSON document, or parsed with its key order kept: properties come out
// in the order written). SchemaError for a schema outside the subset or malformed.
std::string json_schema_to_gbnf(const std::string& schema_json);
std::string json_schema_value_to_gbnf(const nlohmann::ordered_json& schema);
// The GBNF text for any JSON object (OpenAI's response_format json_object).
std::string json_object_gbnf();

// The grammar, parsed: SchemaError also for a schema the grammar cannot run (a $ref cycle that never reaches a
// value, such as {"$ref": "#"}).
std::shared_ptr<const Grammar> json_schema_grammar(const std::string& schema_json);
std::shared_ptr<const Grammar> json_schema_value_grammar(const nlohmann::ordered_json& schema);

}  // namespace plainllama
