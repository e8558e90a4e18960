import TimerdCore

/// One reply line. The daemon sends exactly one per request, in request order.
///
/// Wire forms (all without the terminating `\n`):
/// - `OK` — success without payload: `.ok(nil)`;
/// - `OK <payload>` — success with a one-line payload (JSON text, opaque to this codec): `.ok(payload)`.
///   Everything after the first space is the payload, verbatim (`OK ` gives `.ok("")`);
/// - `ERR <code> <message>` — failure: `code` is kebab-case (`[a-z0-9]+(-[a-z0-9]+)*`), the message is
///   everything after the space following the code (`ERR <code>` alone gives an empty message).
public enum Reply: Sendable, Hashable, CustomStringConvertible {
    case ok(String?)
    /// `code` is kept as a raw string so a client understands codes newer than itself; see
    /// ``errorCode`` to map it onto `TimerdError.Code`.
    case err(code: String, message: String)

    /// `.err` carrying the error's stable code and its message.
    public init(_ error: TimerdError) {
        self = .err(code: error.code.rawValue, message: error.message)
    }

    /// True for `.ok`.
    public var isOK: Bool {
        if case .ok = self { return true }
        return false
    }

    /// The code as a known `TimerdError.Code`, or nil for `.ok` and for codes this build does not know.
    public var errorCode: TimerdError.Code? {
        if case .err(let code, _) = self { return TimerdError.Code(rawValue: code) }
        return nil
    }

    /// True when `code` is kebab-case: `[a-z0-9]+(-[a-z0-9]+)*`.
    public static func isValidCode(_ code: String) -> Bool {
        var previousWasDash = true  // forbids a leading dash
        for b in code.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                previousWasDash = false
            case UInt8(ascii: "-"):
                if previousWasDash { return false }
                previousWasDash = true
            default:
                return false
            }
        }
        return !previousWasDash  // forbids empty and a trailing dash
    }

    // MARK: Encoding

    /// The reply as one line, without the terminating `\n`.
    ///
    /// Every `\r` and `\n` in the payload or message is replaced by a space so the reply stays one line
    /// (for JSON payloads this is harmless: raw newlines can only be insignificant whitespace there).
    /// A code that is not kebab-case (see ``isValidCode(_:)``) is a programming error; it is sent as
    /// `internal` with the bad code prefixed to the message, so the line still parses.
    public func encode() -> String {
        switch self {
        case .ok(nil):
            return "OK"
        case .ok(let payload?):
            return "OK " + Reply.singleLine(payload)
        case .err(let code, let message):
            var code = code
            var message = Reply.printable(Reply.singleLine(message))
            if !Reply.isValidCode(code) {
                message = "invalid error code " + Words.forceQuote(Reply.singleLine(code)) + ": " + message
                code = TimerdError.Code.internal.rawValue
            }
            return message.isEmpty ? "ERR " + code : "ERR " + code + " " + message
        }
    }

    /// Appends ``encode()``'s line and a `\n` to `line`, copying a large payload once (a `LIST` of
    /// 100,000 jobs is a 60 MB payload).
    public func appendLine(to line: inout [UInt8]) {
        if case .ok(let payload?) = self {
            line += "OK ".utf8
            line += Reply.singleLine(payload).utf8
        } else {
            line += encode().utf8
        }
        line.append(UInt8(ascii: "\n"))
    }

    /// Same as ``encode()``.
    public var description: String { encode() }

    static func singleLine(_ s: String) -> String {
        guard hasLineBreak(s) else { return s }
        var out = String.UnicodeScalarView()
        for scalar in s.unicodeScalars {
            out.append(scalar == "\n" || scalar == "\r" ? " " : scalar)
        }
        return String(out)
    }

    /// Whether `s` has a `\n` or `\r`, looked for over its bytes in place: a `LIST` payload of 60 MB took
    /// a tenth of a second through the generic `contains(where:)` of the UTF-8 view.
    private static func hasLineBreak(_ s: String) -> Bool {
        func isBreak(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") }
        let found = s.utf8.withContiguousStorageIfAvailable { bytes in
            // Whole words at a time, without a branch per byte: a byte is a break when it is 10 or 13.
            var found = false
            var index = 0
            while index < bytes.count, !found {
                let end = min(index + 4096, bytes.count)
                var hits: UInt8 = 0
                for byte in bytes[index..<end] { hits |= (byte == 10 ? 1 : 0) | (byte == 13 ? 1 : 0) }
                found = hits != 0
                index = end
            }
            return found
        }
        return found ?? s.utf8.contains(where: isBreak)
    }

    /// Escapes control characters other than tab as `\xNN`, so an error message that quotes a client's
    /// bytes can never carry terminal escape sequences to whoever prints it.
    static func printable(_ s: String) -> String {
        guard s.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) else { return s }
        var out = ""
        for scalar in s.unicodeScalars {
            if (scalar.value < 0x20 && scalar != "\t") || scalar.value == 0x7F {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    // MARK: Parsing

    /// Parses one reply line. A trailing `\n`, `\r\n` or lone `\r` is ignored.
    ///
    /// - Throws: `TimerdError(.badArgument, …)` for anything that is not one of the wire forms above
    ///   (unknown status word, lower-case `ok`, `ERR` without a code, a code that is not kebab-case).
    public static func parse(_ line: String) throws(TimerdError) -> Reply {
        var bytes = Array(line.utf8)
        Request.stripTerminator(&bytes)
        return try parse(validBytes: bytes)
    }

    /// Parses one reply line given as bytes (as produced by ``LineFramer``); same rules as ``parse(_:)``.
    ///
    /// - Throws: `TimerdError(.badEncoding, …)` when the line is not valid UTF-8, else as ``parse(_:)``.
    public static func parse(line: [UInt8]) throws(TimerdError) -> Reply {
        var bytes = line
        Request.stripTerminator(&bytes)
        // An `OK` payload is checked once, as its string is made (a `LIST` reply is 60 MB).
        if bytes.starts(with: "OK ".utf8) {
            guard let payload = String(validating: bytes[3...], as: UTF8.self) else {
                throw TimerdError(.badEncoding, "reply line is not valid UTF-8")
            }
            return .ok(payload)
        }
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw TimerdError(.badEncoding, "reply line is not valid UTF-8")
        }
        return try parse(validBytes: bytes)
    }

    /// Works on bytes, never on `Character`s: a payload starting with a combining mark must not merge
    /// with the separating space.
    private static func parse(validBytes bytes: [UInt8]) throws(TimerdError) -> Reply {
        let space = UInt8(ascii: " ")
        if bytes.elementsEqual("OK".utf8) { return .ok(nil) }
        if bytes.starts(with: "OK ".utf8) {
            return .ok(String(decoding: bytes.dropFirst(3), as: UTF8.self))
        }
        if bytes.starts(with: "ERR ".utf8) {
            let rest = bytes.dropFirst(4)
            let codeEnd = rest.firstIndex(of: space) ?? rest.endIndex
            let code = String(decoding: rest[..<codeEnd], as: UTF8.self)
            guard isValidCode(code) else {
                throw TimerdError(.badArgument, "malformed reply: bad error code \(Words.quote(Words.abbreviate(code)))")
            }
            let message = codeEnd == rest.endIndex ? "" : String(decoding: rest[(codeEnd + 1)...], as: UTF8.self)
            return .err(code: code, message: message)
        }
        let shown = String(decoding: bytes, as: UTF8.self)
        throw TimerdError(.badArgument, "malformed reply: \(Words.quote(Words.abbreviate(shown)))")
    }

}
