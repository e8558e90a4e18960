import Testing
import TimerdCore
@testable import TimerdProtocol

@Suite("Words: splitting and quoting")
struct WordsTests {
    static let splitTable: [(line: String, words: [String])] = [
        ("a b c", ["a", "b", "c"]),
        ("  a\t\tb  \t", ["a", "b"]),
        ("", []),
        ("   \t ", []),
        // single quotes: literal, no escapes
        ("'a b'", ["a b"]),
        (#"'a\b'"#, [#"a\b"#]),
        (#"'a\'"#, [#"a\"#]),
        (#"'a"b'"#, [#"a"b"#]),
        ("'a\tb'", ["a\tb"]),
        // double quotes: escapes
        (#""a b""#, ["a b"]),
        (#""a\"b""#, [#"a"b"#]),
        (#""a\\b""#, [#"a\b"#]),
        (#""a\nb""#, ["a\nb"]),
        (#""a\tb""#, ["a\tb"]),
        (#""a\qb""#, ["aqb"]),
        (#""a\'b""#, ["a'b"]),
        (#""a'b""#, ["a'b"]),
        ("\"a\tb\"", ["a\tb"]),
        (#""\é""#, ["é"]),
        // backslash outside quotes
        (#"a\ b"#, ["a b"]),
        (#"a\nb"#, ["anb"]),
        (#"\'"#, ["'"]),
        (#"\""#, ["\""]),
        (#"\\"#, [#"\"#]),
        ("a\\\tb", ["a\tb"]),
        // mid-word quotes and concatenation
        (#"command="echo hi""#, ["command=echo hi"]),
        (#"'a'"b"c"#, ["abc"]),
        ("a''b", ["ab"]),
        (#"pre'fix x'"post y""#, ["prefix xpost y"]),
        // empty words
        ("''", [""]),
        (#""""#, [""]),
        ("''''", [""]),
        ("a '' b", ["a", "", "b"]),
        (#"'' """#, ["", ""]),
        // unicode, including combining marks right after a quote
        ("'e\u{301}'", ["e\u{301}"]),
        ("'\u{301}'", ["\u{301}"]),
        ("\"\u{301}\"", ["\u{301}"]),
        ("x'\u{301}'y", ["x\u{301}y"]),
        ("'\u{301}' '\u{301}'", ["\u{301}", "\u{301}"]),
        ("\\\u{301}", ["\u{301}"]),
        ("'a'\u{301}", ["a\u{301}"]),
        ("日本 語", ["日本", "語"]),
        ("👍🏽 🇫🇷", ["👍🏽", "🇫🇷"]),
        ("a\u{A0}b", ["a\u{A0}b"]),  // only space and tab separate words
        ("a\u{3000}b c", ["a\u{3000}b", "c"]),
        // other control characters are ordinary word bytes
        ("a\rb", ["a\rb"]),
        ("a\u{0}b", ["a\u{0}b"]),
    ]

    @Test("split table", arguments: splitTable)
    func splitMatchesTable(line: String, words: [String]) throws {
        #expect(utf8(try Words.split(line)) == utf8(words))
    }

    static let badQuoting: [String] = [
        "'abc", "\"abc", "abc\\", "\"abc\\", "a 'b", "'", "\"", "\\", #""\""#, "ok 'fine' \"not", "x\\\\\\",
        "'\u{301}",
    ]

    @Test("bad quoting", arguments: badQuoting)
    func badQuotingErrors(line: String) {
        let error = caught { try Words.split(line) }
        #expect(error?.code == .badQuoting)
        #expect(error?.message.isEmpty == false)
    }

    static let quoteTable: [(word: String, quoted: String)] = [
        ("abc", "abc"),
        ("", "''"),
        ("a b", "'a b'"),
        ("a\tb", "'a\tb'"),
        ("it's", #""it's""#),
        ("a\nb", #""a\nb""#),
        ("it's\ta\n", #""it's\ta\n""#),
        (#"back\slash"#, #"'back\slash'"#),
        (#"say "hi""#, #"'say "hi"'"#),
        (#"it's "x"\"#, #""it's \"x\"\\""#),
        ("--", "'--'"),
        ("-", "-"),
        ("---", "---"),
        ("--x", "--x"),
        ("a=b", "'a=b'"),
        ("_=", "'_='"),
        ("a=", "'a='"),
        ("=b", "=b"),
        ("1a=b", "1a=b"),
        ("a-b=c", "a-b=c"),
        ("/x=y", "/x=y"),
        ("é=1", "é=1"),
        ("é", "é"),
        ("\u{301}", "\u{301}"),
        ("👍🏽", "👍🏽"),
        ("a\u{A0}b", "'a\u{A0}b'"),
        ("\u{85}", "'\u{85}'"),
        ("\u{7F}", "'\u{7F}'"),
        ("a\rb", "'a\rb'"),
        ("$HOME", "$HOME"),
    ]

    @Test("quote table", arguments: quoteTable)
    func quoteMatchesTable(word: String, quoted: String) throws {
        #expect(Array(Words.quote(word).utf8) == Array(quoted.utf8))
    }

    static let roundTripWords: [String] = quoteTable.map(\.word) + trickyFragments + [
        "'\"'\"", "\\\\\\", "a'b\"c\\d\ne\tf", "\u{301}'", "'\u{301}", "\"\u{301}\"", "e\u{301}'\u{301}",
        "\n", "\n\n", "\r\n", "\t", " ", "  ", "=", "==", "a==", "--=", String(repeating: "x'", count: 50),
    ]

    @Test("quote then split gives back the word, byte for byte", arguments: roundTripWords)
    func quoteRoundTrip(word: String) throws {
        let quoted = Words.quote(word)
        #expect(try utf8(Words.split(quoted)) == utf8([word]))
        #expect(!quoted.utf8.contains(UInt8(ascii: "\n")))
        // Quoted words also survive being placed next to each other.
        let pair = quoted + " " + quoted
        #expect(try utf8(Words.split(pair)) == utf8([word, word]))
    }

    @Test("generated words round-trip through quote/split")
    func generatedRoundTrip() throws {
        var rng = Xorshift(seed: 0xC0FFEE)
        for _ in 0..<3000 {
            let words = (0..<Int.random(in: 1...5, using: &rng)).map { _ in randomWord(&rng) }
            let line = words.map(Words.quote).joined(separator: Bool.random(using: &rng) ? " " : " \t ")
            #expect(try utf8(Words.split(line)) == utf8(words), "line: \(line.debugDescription)")
            #expect(!line.utf8.contains(UInt8(ascii: "\n")))
        }
    }

    @Test("only unquoted raw bytes form option keys and the -- marker")
    func rawPrefix() throws {
        let tokens = try Words.tokenize(Array(#"a=b 'a=b' a'=b' "a"=b a\=b -- '--' -\- a=' x'"#.utf8)[...])
        #expect(tokens.map { $0.option?.key } == ["a", nil, nil, nil, nil, nil, nil, nil, "a"])
        #expect(tokens.map(\.isDoubleDash) == [false, false, false, false, false, true, false, false, false])
        #expect(tokens.last?.option?.value == " x")
    }
}
