
/// Shell-like word splitting and quoting, as used by request lines (and reusable by config values).
///
/// Grammar (normative, see the protocol description):
/// - Words are separated by runs of spaces (U+0020) and tabs (U+0009). Nothing else separates words.
/// - `'…'` is literal: every byte up to the next `'` is taken as is (no escapes inside).
/// - `"…"` allows backslash escapes: `\n` is a newline, `\t` a tab, and a backslash before any other
///   character (including `\`, `"`) yields that character.
/// - Outside quotes a backslash takes the next character literally (`\n` outside quotes is `n`).
/// - Quotes can appear mid-word and concatenate: `command="echo hi"` is the one word `command=echo hi`;
///   `''` is an empty word.
///
/// Tokenizing works on UTF-8 bytes (never on `Character`s), so a combining mark right after a quote
/// stays a separate scalar and quoting always round-trips.
public enum Words {
    /// Splits `s` into words, removing quotes and resolving escapes.
    ///
    /// - Throws: `TimerdError(.badQuoting, …)` for an unterminated `'` or `"` quote or a trailing lone
    ///   backslash.
    /// - Returns: the decoded words, in order; `[]` for an empty or blank string.
    public static func split(_ s: String) throws(TimerdError) -> [String] {
        try tokenize(Array(s.utf8)[...]).map(\.string)
    }

    /// Returns `word` in a form that ``split(_:)`` reads back as exactly one word equal to `word`, and
    /// that a request parser never takes for an option (`key=value`) or for the `--` marker.
    ///
    /// The word is returned unchanged when it is safe bare. Otherwise it is wrapped in single quotes,
    /// or, when it contains a `'` or a newline, in double quotes with `\\`, `\"`, `\n` and `\t` escapes.
    /// The result never contains a raw newline.
    ///
    /// A word needs quoting when it is empty, is `--`, contains a space, tab, quote, backslash, control
    /// character (C0, DEL, C1) or other Unicode whitespace, or looks like an option (an identifier
    /// `[A-Za-z_][A-Za-z0-9_]*` followed by `=`).
    public static func quote(_ word: String) -> String {
        if word.isEmpty || word == "--" || looksLikeOption(word.utf8) || containsSpecial(word) {
            return forceQuote(word)
        }
        return word
    }

    // MARK: - Internals shared with Request

    /// A decoded word plus how many of its leading bytes came from unquoted, unescaped input.
    /// Only such "raw" bytes can form an option key, its `=` or the `--` marker.
    package struct Token: Equatable {
        package var bytes: [UInt8]
        package var rawPrefix: Int

        package var string: String { String(decoding: bytes, as: UTF8.self) }

        /// True for an unquoted `--`.
        package var isDoubleDash: Bool { rawPrefix == 2 && bytes == [UInt8(ascii: "-"), UInt8(ascii: "-")] }

        /// The `(key, value)` split when the word is an option: its first `=` and everything before it
        /// are unquoted, and the part before it is an identifier.
        package var option: (key: String, value: String)? {
            guard let eq = bytes.firstIndex(of: UInt8(ascii: "=")), eq < rawPrefix,
                Words.isIdentifier(bytes[..<eq])
            else { return nil }
            return (
                String(decoding: bytes[..<eq], as: UTF8.self),
                String(decoding: bytes[(eq + 1)...], as: UTF8.self)
            )
        }
    }

    /// Tokenizes a line given as UTF-8 bytes. Only ASCII bytes are interpreted, so valid UTF-8 in gives
    /// valid UTF-8 words out.
    package static func tokenize(_ bytes: ArraySlice<UInt8>) throws(TimerdError) -> [Token] {
        let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
        let single = UInt8(ascii: "'"), double = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        var tokens: [Token] = []
        var current: [UInt8] = []
        var inWord = false
        var raw = true
        var rawPrefix = 0
        var i = bytes.startIndex
        let n = bytes.endIndex
        while i < n {
            let b = bytes[i]
            switch b {
            case space, tab:
                if inWord {
                    tokens.append(Token(bytes: current, rawPrefix: rawPrefix))
                    current = []
                    inWord = false
                    raw = true
                    rawPrefix = 0
                }
                i += 1
            case single:
                inWord = true
                raw = false
                let start = i + 1
                var j = start
                while j < n && bytes[j] != single { j += 1 }
                guard j < n else {
                    throw TimerdError(.badQuoting, "unterminated single quote (opened at byte \(i - bytes.startIndex + 1))")
                }
                current.append(contentsOf: bytes[start..<j])
                i = j + 1
            case double:
                inWord = true
                raw = false
                let opened = i
                i += 1
                while true {
                    guard i < n else {
                        throw TimerdError(.badQuoting, "unterminated double quote (opened at byte \(opened - bytes.startIndex + 1))")
                    }
                    let c = bytes[i]
                    if c == double {
                        i += 1
                        break
                    } else if c == backslash {
                        guard i + 1 < n else {
                            throw TimerdError(.badQuoting, "unterminated double quote (opened at byte \(opened - bytes.startIndex + 1))")
                        }
                        switch bytes[i + 1] {
                        case UInt8(ascii: "n"): current.append(UInt8(ascii: "\n"))
                        case UInt8(ascii: "t"): current.append(tab)
                        case let e: current.append(e)
                        }
                        i += 2
                    } else {
                        current.append(c)
                        i += 1
                    }
                }
            case backslash:
                inWord = true
                raw = false
                guard i + 1 < n else {
                    throw TimerdError(.badQuoting, "trailing backslash escapes nothing")
                }
                current.append(bytes[i + 1])
                i += 2
            default:
                // A run of plain bytes at once, not an append call per byte.
                inWord = true
                var end = i + 1
                while end < n, !isSpecial(bytes[end]) { end += 1 }
                current.append(contentsOf: bytes[i..<end])
                if raw { rawPrefix += end - i }
                i = end
            }
        }
        if inWord { tokens.append(Token(bytes: current, rawPrefix: rawPrefix)) }
        return tokens
    }

    /// A byte `tokenize` interprets: a separator, a quote or a backslash.
    private static func isSpecial(_ b: UInt8) -> Bool {
        b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") || b == UInt8(ascii: "'") || b == UInt8(ascii: "\"")
            || b == UInt8(ascii: "\\")
    }

    /// `[A-Za-z_][A-Za-z0-9_]*` over ASCII bytes.
    package static func isIdentifier(_ bytes: some Collection<UInt8>) -> Bool {
        guard let first = bytes.first, isIdentifierStart(first) else { return false }
        return bytes.allSatisfy { isIdentifierStart($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    private static func isIdentifierStart(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || b == UInt8(ascii: "_")
    }

    /// True when the word, written bare, would parse as an option.
    package static func looksLikeOption(_ utf8: String.UTF8View) -> Bool {
        guard let eq = utf8.firstIndex(of: UInt8(ascii: "=")) else { return false }
        return isIdentifier(utf8[..<eq])
    }

    /// True when the word contains a character that cannot appear bare: separators, quotes, backslash,
    /// control characters, or (for readability) any other Unicode whitespace.
    package static func containsSpecial(_ word: String) -> Bool {
        for s in word.unicodeScalars {
            switch s.value {
            case 0x20, 0x27, 0x22, 0x5C: return true  // space ' " \
            case 0x00...0x1F, 0x7F, 0x80...0x9F: return true  // C0 (incl. tab, \n, \r), DEL, C1
            case 0x21...0x7E: continue
            default: if s.properties.isWhitespace { return true }
            }
        }
        return false
    }

    /// Quotes a value that sits after `key=` in an option: only characters matter there (an empty value,
    /// `=` or `--` are unambiguous).
    package static func quoteOptionValue(_ value: String) -> String {
        containsSpecial(value) ? forceQuote(value) : value
    }

    /// Always quotes: single quotes when possible, else double quotes with escapes.
    package static func forceQuote(_ word: String) -> String {
        let utf8 = word.utf8
        if !utf8.contains(UInt8(ascii: "'")) && !utf8.contains(UInt8(ascii: "\n")) {
            return "'" + word + "'"
        }
        var out: [UInt8] = [UInt8(ascii: "\"")]
        out.reserveCapacity(utf8.count + 8)
        for b in utf8 {
            switch b {
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\n"): out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case UInt8(ascii: "\t"): out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
        return String(decoding: out, as: UTF8.self)
    }
}

extension Words {
    /// Shortens `s` to at most `max` scalars (plus `…`) so error messages stay small when a peer sends a
    /// huge bogus word.
    package static func abbreviate(_ s: String, max: Int = 64) -> String {
        var scalars = s.unicodeScalars
        guard scalars.count > max else { return s }
        scalars.removeSubrange(scalars.index(scalars.startIndex, offsetBy: max)...)
        return String(scalars) + "…"
    }
}
