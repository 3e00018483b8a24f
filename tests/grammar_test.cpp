// GBNF: the parser's grammars and errors, and the matcher against strings it must accept or refuse.
#include "plainllama/run/grammar.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "plainllama/run/grammar_matcher.h"
#include "test_util.h"

namespace plainllama::gbnf_test {  // named: the test files compile in unity batches

using test::HasSubstr;

// Whether the whole text is a sentence of the grammar.
bool matches(const std::string& gbnf, const std::string& text) {
    GrammarMatcher m(std::make_shared<const Grammar>(parse_gbnf(gbnf)));
    const int32_t s = m.feed(m.start(), text);
    return s != GrammarMatcher::kDead && m.can_end(s);
}
// Whether the text can still become a sentence.
bool prefix_ok(const std::string& gbnf, const std::string& text) {
    GrammarMatcher m(std::make_shared<const Grammar>(parse_gbnf(gbnf)));
    return m.feed(m.start(), text) != GrammarMatcher::kDead;
}
std::string error_of(const std::string& gbnf) {
    try {
        parse_gbnf(gbnf);
    } catch (const GrammarError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(Gbnf, LiteralsAndSequences) {
    const std::string g = "root ::= \"ab\" \"c\"\n";
    EXPECT_TRUE(matches(g, "abc"));
    EXPECT_FALSE(matches(g, "ab"));
    EXPECT_TRUE(prefix_ok(g, "ab"));
    EXPECT_FALSE(matches(g, "abcd"));
    EXPECT_FALSE(prefix_ok(g, "abd"));
    EXPECT_FALSE(matches(g, ""));
}

TEST(Gbnf, Alternatives) {
    const std::string g = "root ::= \"cat\" | \"dog\" | \"\"\n";
    EXPECT_TRUE(matches(g, "cat"));
    EXPECT_TRUE(matches(g, "dog"));
    EXPECT_TRUE(matches(g, ""));
    EXPECT_FALSE(matches(g, "cow"));
    EXPECT_FALSE(matches(g, "catdog"));
}

TEST(Gbnf, GroupsAndRules) {
    const std::string g =
        "root ::= greeting (\", \" name)? \"!\"\n"
        "greeting ::= \"hi\" | \"hello\"\n"
        "name ::= [A-Z] [a-z]*\n";
    EXPECT_TRUE(matches(g, "hi!"));
    EXPECT_TRUE(matches(g, "hello, Bob!"));
    EXPECT_TRUE(matches(g, "hi, X!"));
    EXPECT_FALSE(matches(g, "hi, bob!"));
    EXPECT_FALSE(matches(g, "hello,Bob!"));
    EXPECT_FALSE(matches(g, "hey!"));
}

TEST(Gbnf, Repetitions) {
    EXPECT_TRUE(matches("root ::= \"a\"*", ""));
    EXPECT_TRUE(matches("root ::= \"a\"*", "aaaa"));
    EXPECT_FALSE(matches("root ::= \"a\"+", ""));
    EXPECT_TRUE(matches("root ::= \"a\"+", "aaa"));
    EXPECT_TRUE(matches("root ::= \"a\"? \"b\"", "b"));
    EXPECT_TRUE(matches("root ::= \"a\"? \"b\"", "ab"));
    EXPECT_FALSE(matches("root ::= \"a\"? \"b\"", "aab"));
    const std::string g = "root ::= [0-9]{2,4}";
    EXPECT_FALSE(matches(g, "1"));
    EXPECT_TRUE(matches(g, "12"));
    EXPECT_TRUE(matches(g, "1234"));
    EXPECT_FALSE(matches(g, "12345"));
    EXPECT_TRUE(matches("root ::= \"x\"{3}", "xxx"));
    EXPECT_FALSE(matches("root ::= \"x\"{3}", "xx"));
    EXPECT_FALSE(matches("root ::= \"x\"{3}", "xxxx"));
    EXPECT_FALSE(matches("root ::= \"x\"{2,}", "x"));
    EXPECT_TRUE(matches("root ::= \"x\"{2,}", "xxxxxxx"));
    EXPECT_TRUE(matches("root ::= (\"ab\" | \"c\"){0,2}", "abc"));
    EXPECT_TRUE(matches("root ::= (\"ab\" | \"c\"){0,2}", ""));
    EXPECT_FALSE(matches("root ::= (\"ab\" | \"c\"){0,2}", "abcc"));
    EXPECT_TRUE(matches("root ::= \"ab\"+", "ababab"));  // a string literal repeats as a whole
    EXPECT_FALSE(matches("root ::= \"ab\"+", "abb"));
}

TEST(Gbnf, CharacterClasses) {
    const std::string g = "root ::= [a-cx] [^a-z\\n] .\n";
    EXPECT_TRUE(matches(g, "a1z"));
    EXPECT_TRUE(matches(g, "xA\n"));
    EXPECT_FALSE(matches(g, "dAz"));
    EXPECT_FALSE(matches(g, "aqz"));
    EXPECT_FALSE(matches(g, "a\nz"));
    EXPECT_TRUE(matches(g, "b\xC3\xA9\xE2\x82\xAC"));  // é then €: any character, a whole code point each
    EXPECT_FALSE(matches(g, "b\xC3\xA9"));
}

TEST(Gbnf, EscapesAndUnicode) {
    EXPECT_TRUE(matches("root ::= \"\\x41\\u00e9\\U0001F600\\t\\\"\\\\\"", "A\xC3\xA9\xF0\x9F\x98\x80\t\"\\"));
    EXPECT_TRUE(matches("root ::= [\\]\\[\\-]+", "][-"));
    EXPECT_TRUE(matches("root ::= [ぁ-ゟ]+", "ひらがな"));
    EXPECT_FALSE(matches("root ::= [ぁ-ゟ]+", "カタカナ"));
    EXPECT_TRUE(matches("root ::= \"日本\"", "日本"));
}

TEST(Gbnf, CommentsAndNewlines) {
    const std::string g =
        "# a list\n"
        "root ::= (  # items, one or more\n"
        "    item\n"
        "    (\",\" item)*\n"
        ")\n"
        "item ::= \"x\" |\n"
        "         \"y\"   # a newline after | goes on\n"
        "\n";
    EXPECT_TRUE(matches(g, "x,y,x"));
    EXPECT_FALSE(matches(g, "x,"));
}

TEST(Gbnf, RecursionThatReadsFirst) {
    const std::string g =
        "root ::= value\n"
        "value ::= \"[\" (value (\",\" value)*)? \"]\" | [0-9]\n";
    EXPECT_TRUE(matches(g, "[1,[2,[]],[[3]]]"));
    EXPECT_FALSE(matches(g, "[1,[2]"));
    EXPECT_TRUE(prefix_ok(g, "[[[[[[[[[["));
}

TEST(Gbnf, CompleteAndNothingMore) {
    auto g = std::make_shared<const Grammar>(parse_gbnf("root ::= \"a\" \"b\"?"));
    GrammarMatcher m(g);
    const int32_t a = m.feed(m.start(), "a");
    EXPECT_TRUE(m.can_end(a));
    EXPECT_FALSE(m.must_end(a));  // "b" may follow
    const int32_t ab = m.feed(a, "b");
    EXPECT_TRUE(m.must_end(ab));
    EXPECT_FALSE(m.can_end(m.start()));
}

// A code point spread over several feeds (byte tokens): allowed while some character of the class can complete it.
TEST(Gbnf, PartialUtf8) {
    auto g = std::make_shared<const Grammar>(parse_gbnf("root ::= [\\u00e0-\\u00ff]"));  // à..ÿ: C3 A0..C3 BF
    GrammarMatcher m(g);
    const int32_t half = m.next(m.start(), 0xC3);
    ASSERT_NE(half, GrammarMatcher::kDead);
    EXPECT_FALSE(m.can_end(half));
    EXPECT_NE(m.next(half, 0xA9), GrammarMatcher::kDead);       // é
    EXPECT_EQ(m.next(half, 0x89), GrammarMatcher::kDead);       // É (C3 89) is outside
    EXPECT_EQ(m.next(m.start(), 0xC4), GrammarMatcher::kDead);  // C4 xx is U+0100 or above
    EXPECT_EQ(m.next(m.start(), 0xA9), GrammarMatcher::kDead);  // a continuation byte cannot start
    EXPECT_EQ(m.next(m.start(), 'a'), GrammarMatcher::kDead);
    // Invalid UTF-8 is never accepted, even by a class that holds everything.
    auto any = std::make_shared<const Grammar>(parse_gbnf("root ::= .*"));
    GrammarMatcher n(any);
    EXPECT_EQ(n.feed(n.start(), "\xC0\x80"), GrammarMatcher::kDead);          // overlong
    EXPECT_EQ(n.feed(n.start(), "\xED\xA0\x80"), GrammarMatcher::kDead);      // a surrogate
    EXPECT_EQ(n.feed(n.start(), "\xF4\x90\x80\x80"), GrammarMatcher::kDead);  // past U+10FFFF
    EXPECT_EQ(n.feed(n.start(), "\xFF"), GrammarMatcher::kDead);
    const int32_t four = n.feed(n.start(), "\xF0\x9F\x98");
    ASSERT_NE(four, GrammarMatcher::kDead);
    EXPECT_FALSE(n.can_end(four));
    EXPECT_TRUE(n.can_end(n.next(four, 0x80)));
}

TEST(Gbnf, ForgettingKeepsTheState) {
    auto g = std::make_shared<const Grammar>(
        parse_gbnf("root ::= v\nv ::= \"[\" (v (\",\" v)*)? \"]\" | [0-9]+ | \"\\u00e9\""));
    GrammarMatcher m(g);
    int32_t s = m.feed(m.start(), "[[1,[2");
    ASSERT_NE(s, GrammarMatcher::kDead);
    s = m.next(s, '3');
    s = m.forget_all_but(s);
    EXPECT_EQ(m.n_states(), 2u);  // the start and the state kept
    EXPECT_TRUE(m.can_end(m.feed(s, "4]],[]]")));
    EXPECT_EQ(m.feed(s, "]]]]"), GrammarMatcher::kDead);
    s = m.forget_all_but(m.feed(s, ",\xC3"));  // in the middle of a code point
    EXPECT_TRUE(m.can_end(m.feed(s, "\xA9]]]")));
}

TEST(Gbnf, Errors) {
    EXPECT_TRUE(
        HasSubstr(error_of("root ::= \"a\"\nroot ::= \"b\""), "line 2, column 1: rule 'root' is defined twice"));
    EXPECT_TRUE(HasSubstr(error_of("item ::= \"a\""), "no rule named 'root'"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= item\n"), "line 1, column 10: rule 'item' is used but never defined"));
    EXPECT_TRUE(HasSubstr(error_of("root = \"a\""), "line 1, column 6: expected '::=' after the rule name 'root'"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"abc"), "line 1, column 10: the string is not closed"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= [a-z"), "line 1, column 10: the character class is not closed"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= [z-a]"), "the range's end is below its start"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= (\"a\" | \"b\""), "the group is not closed with ')'"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"a\")"), "')' without a '('"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= * \"a\""), "line 1, column 10: '*' with nothing before it"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"a\"{3,2}"), "the maximum is below the minimum"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"a\"{99999}"), "a repetition count above 10000"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"a\"{2"), "expected '}'"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"\\q\""), "unknown escape '\\q'"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"\\ud800\""), "not a Unicode scalar value"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= [^\\x00-\\U0010FFFF]"), "matches no character"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= <think>"), "token references"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"a\"\n\n  ~"), "line 3, column 3: expected a rule name"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= a b ::= \"c\""), "expected the end of the line before the next rule"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"\xFF\""), "not valid UTF-8"));
    // Columns count characters, not bytes.
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"é\" ?? x"), "line 1, column 15: '?' with nothing before it"));
}

TEST(Gbnf, LeftRecursionIsRefused) {
    EXPECT_TRUE(HasSubstr(error_of("root ::= root \"a\" | \"b\""), "rule 'root' is left-recursive (root -> root"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= expr\nexpr ::= term | expr \"+\" term\nterm ::= [0-9]"),
                          "line 2, column 1: rule 'expr' is left-recursive"));
    // Through a rule that can match nothing, and through a chain of rules.
    EXPECT_TRUE(HasSubstr(error_of("root ::= opt root \"x\" | \"y\"\nopt ::= \"o\"?"), "left-recursive"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= a\na ::= b \"x\"\nb ::= a | \"y\""), "left-recursive (a -> b -> a"));
    // Right recursion and recursion after a character are fine.
    EXPECT_EQ(error_of("root ::= \"a\" root | \"\""), "(no error)");
    EXPECT_EQ(error_of("root ::= \"(\" root \")\" | \"x\""), "(no error)");
    // A cycle through references that end their alternatives pushes nothing: fine.
    EXPECT_EQ(error_of("root ::= a | \"x\"\na ::= root"), "(no error)");
    // A root that can never end.
    EXPECT_TRUE(HasSubstr(error_of("root ::= a\na ::= a"), "line 1, column 1: the grammar matches no text"));
    EXPECT_TRUE(HasSubstr(error_of("root ::= \"x\" a\na ::= \"y\" a"), "the grammar matches no text"));
    // Long chains of rules are checked without recursion.
    std::string chain = "root ::= r0\n";
    for (int i = 0; i < 50000; ++i) chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
    chain += "r50000 ::= \"y\" | r0";
    EXPECT_TRUE(HasSubstr(error_of(chain), "line 2, column 1: rule 'r0' is left-recursive (r0 -> r1 -> r2"));
}

// A repetition of something that can match nothing: the same strings as without the empty match.
TEST(Gbnf, RepeatingWhatCanBeEmpty) {
    for (const char* g :
         {"root ::= (\"a\"?)*", "root ::= (\"a\"*)+", "root ::= (\"a\"? \"b\"?){2,}", "root ::= ((\"a\" | \"\")*)*"}) {
        EXPECT_TRUE(matches(g, "")) << g;
        EXPECT_TRUE(matches(g, "aaa")) << g;
        EXPECT_FALSE(matches(g, "c")) << g;
    }
    EXPECT_TRUE(matches("root ::= \"\"* (\"\")+ ()? \"a\" (){3}", "a"));  // nothing repeated is nothing
    EXPECT_TRUE(matches("root ::= (\"a\"?)* \"b\"", "aab"));
    EXPECT_TRUE(matches("root ::= (\"a\"?)* \"b\"", "b"));
    EXPECT_FALSE(matches("root ::= (\"a\"?)* \"b\"", "aa"));
}

// Text from a client: whatever the bytes, a grammar or a GrammarError, never a crash or a hang.
TEST(Gbnf, RandomTextIsAGrammarOrAnError) {
    std::mt19937 rng(1);
    const std::string alphabet = "root ::=\"[]()|*+?{},.-^\\#\n\tabx09\xC3\xA9";
    int parsed = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string s = "root ::= ";
        for (int k = int(rng() % 40); k > 0; --k) s += alphabet[rng() % alphabet.size()];
        try {
            GrammarMatcher m(std::make_shared<const Grammar>(parse_gbnf(s)));
            m.feed(m.start(), "ab(x)09\xC3\xA9");
            ++parsed;
        } catch (const GrammarError&) {
        }
    }
    EXPECT_GT(parsed, 100);  // the alphabet makes grammars too, not only errors
    // Groups nested beyond the parser's depth, and rules nested beyond the matcher's.
    EXPECT_TRUE(HasSubstr(error_of("root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')')),
                          "groups nest deeper than 1000 levels"));
    std::string deep = "root ::= r0\n";
    for (int i = 0; i < 20000; ++i) deep += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
    deep += "r20000 ::= \"z\"";
    EXPECT_THROW(GrammarMatcher(std::make_shared<const Grammar>(parse_gbnf(deep))), Error);
}

}  // namespace plainllama::gbnf_test
