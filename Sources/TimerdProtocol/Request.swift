import TimerdCore

/// One `key=value` option of a request. Keys are case-sensitive and may repeat.
public struct Option: Sendable, Hashable, CustomStringConvertible {
    /// The option name; on the wire it must match `[A-Za-z_][A-Za-z0-9_]*` (see ``isValidKey(_:)``).
    public var key: String
    /// The value after the first `=`: may be empty and may itself contain `=`.
    public var value: String

    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }

    /// True when `key` matches `[A-Za-z_][A-Za-z0-9_]*` (ASCII only), i.e. can be sent as an option key.
    public static func isValidKey(_ key: String) -> Bool { Words.isIdentifier(key.utf8) }

    /// The option as it appears on the wire, quoted as needed (e.g. `command='echo hi'`).
    public var description: String { Words.encodeOption(self) }
}

/// A parsed request line: a verb, positional words, options in order, and optional argv after `--`.
///
/// Wire form: `VERB word… [--  argv…]`, see ``parse(line:)``. Two requests are equal when all four parts
/// are equal; how positionals and options were interleaved on the line is not kept.
public struct Request: Sendable, Hashable, CustomStringConvertible {
    public var verb: Verb
    /// Words after the verb (and before `--`) that are not options, in order.
    public var positionals: [String]
    /// `key=value` words after the verb (and before `--`), in order; keys may repeat.
    public var options: [Option]
    /// The words after a lone unquoted `--`, verbatim (options and `--` are not interpreted there).
    /// `nil` means the line had no `--`; `[]` means `--` with nothing after it.
    public var argv: [String]?

    public init(verb: Verb, positionals: [String] = [], options: [Option] = [], argv: [String]? = nil) {
        self.verb = verb
        self.positionals = positionals
        self.options = options
        self.argv = argv
    }

    /// All values given for `key`, in the order they appeared (`env=A=1 env=B=2` → `["A=1", "B=2"]`).
    public func values(_ key: String) -> [String] {
        options.compactMap { $0.key == key ? $0.value : nil }
    }

    /// The value of the last option named `key` (last wins), or nil when there is none.
    public func value(_ key: String) -> String? {
        options.last(where: { $0.key == key })?.value
    }

    // MARK: Parsing

    /// Parses one request line given as bytes (as produced by ``LineFramer``).
    ///
    /// - A trailing line terminator (`\n`, `\r\n`) or a lone trailing `\r` is ignored; the line should
    ///   otherwise contain no newline.
    /// - The line is split with ``Words/split(_:)`` rules. The first word is the verb (ASCII
    ///   case-insensitive). Each later word whose unquoted leading part is an identifier followed by an
    ///   unquoted `=` is an option (`key=value`, value may be empty or contain `=`, and may be quoted:
    ///   `command="echo hi"`). Quoting any of the key or the `=` (`'a=b'`, `a\=b`) makes it a positional.
    /// - A lone unquoted `--` ends options: every later word goes to ``argv`` verbatim. A quoted `'--'`
    ///   is an ordinary word.
    ///
    /// - Throws: `TimerdError` with code
    ///   `.badEncoding` (not valid UTF-8), `.badQuoting` (unbalanced quote, trailing backslash),
    ///   `.missingArgument` (empty or blank line: "empty request"), `.unknownVerb` (message names the verb).
    public static func parse(line: [UInt8]) throws(TimerdError) -> Request {
        let bytes = Request.withoutTerminator(line[...])
        // ASCII, as nearly every line is, is UTF-8; only other lines are validated (as a `String`).
        guard bytes.allSatisfy({ $0 < 0x80 }) || String(validating: bytes, as: UTF8.self) != nil else {
            throw TimerdError(.badEncoding, "request line is not valid UTF-8")
        }
        return try parse(tokens: Words.tokenize(bytes))
    }

    /// Parses one request line; same rules and errors as ``parse(line:)`` (a `String` is always valid
    /// UTF-8, so never `.badEncoding`).
    public static func parse(_ line: String) throws(TimerdError) -> Request {
        try parse(tokens: Words.tokenize(Request.withoutTerminator(Array(line.utf8)[...])))
    }

    private static func parse(tokens: [Words.Token]) throws(TimerdError) -> Request {
        guard let first = tokens.first else {
            throw TimerdError(.missingArgument, "empty request")
        }
        let word = first.string
        guard let verb = Verb(word: word) else {
            throw TimerdError(.unknownVerb, "unknown verb \(Words.quote(Words.abbreviate(word)))")
        }
        var request = Request(verb: verb)
        for token in tokens.dropFirst() {
            if request.argv != nil {
                request.argv!.append(token.string)
            } else if token.isDoubleDash {
                request.argv = []
            } else if let (key, value) = token.option {
                request.options.append(Option(key: key, value: value))
            } else {
                request.positionals.append(token.string)
            }
        }
        return request
    }

    /// Without one trailing `\n` and then one trailing `\r`.
    static func withoutTerminator(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var bytes = bytes
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return bytes
    }

    /// Removes one trailing `\n` and then one trailing `\r`.
    static func stripTerminator(_ bytes: inout [UInt8]) {
        bytes.removeLast(bytes.count - withoutTerminator(bytes[...]).count)
    }


    // MARK: Encoding

    /// The request as one line, without the terminating `\n`, that ``parse(_:)`` reads back as an
    /// equal request.
    ///
    /// Layout: `VERB positionals… options… [-- argv…]`, words separated by one space. Positionals and
    /// argv words are quoted with ``Words/quote(_:)`` (so `''` for empty, `'a=b'` for a positional that
    /// looks like an option, `'--'` for a literal `--`); option values are quoted only when their
    /// characters require it (`key=`, `key='a b'`). The line never contains a raw `\n`.
    ///
    /// An option whose key is not a valid identifier (see ``Option/isValidKey(_:)``) cannot be sent as an
    /// option: it is encoded as the quoted positional word `key=value`.
    public func encode() -> String {
        var parts = [verb.rawValue]
        parts.reserveCapacity(1 + positionals.count + options.count + (argv.map { $0.count + 1 } ?? 0))
        for word in positionals { parts.append(Words.quote(word)) }
        for option in options { parts.append(Words.encodeOption(option)) }
        if let argv {
            parts.append("--")
            for word in argv { parts.append(Words.quote(word)) }
        }
        return parts.joined(separator: " ")
    }

    /// Same as ``encode()``.
    public var description: String { encode() }
}

extension Words {
    static func encodeOption(_ option: Option) -> String {
        guard Option.isValidKey(option.key) else { return forceQuote(option.key + "=" + option.value) }
        return option.key + "=" + quoteOptionValue(option.value)
    }
}
