import TimerdCore

/// A job's options as stored: a JSON array of `[key, value]` pairs, in order, e.g.
/// `[["every","5m"],["env","A=b"]]`. Readable with the `sqlite3` shell (`json_each`) and unambiguous
/// whatever the values hold. Non-ASCII text is written as is (UTF-8); quotes, backslashes and control
/// characters are escaped.
enum OptionsCoding {
    static func encode(_ options: [KeyValue]) -> String {
        var out = "["
        for (index, option) in options.enumerated() {
            if index > 0 { out += "," }
            out += "["
            appendString(option.key, to: &out)
            out += ","
            appendString(option.value, to: &out)
            out += "]"
        }
        out += "]"
        return out
    }

    private static func appendString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// Parses what `encode` writes (and any JSON of that shape); throws on anything else.
    static func decode(_ text: String) throws(StoreError) -> [KeyValue] {
        var parser = Parser(bytes: Array(text.utf8))
        return try parser.options()
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        func fail(_ why: String) -> StoreError {
            StoreError("stored job options are not a JSON array of [key, value] pairs: \(why) at byte \(index)")
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func expect(_ byte: UInt8) throws(StoreError) {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else {
                throw fail("expected '\(Character(Unicode.Scalar(byte)))'")
            }
            index += 1
        }

        mutating func peek(_ byte: UInt8) -> Bool {
            skipSpace()
            return index < bytes.count && bytes[index] == byte
        }

        mutating func options() throws(StoreError) -> [KeyValue] {
            var result: [KeyValue] = []
            try expect(UInt8(ascii: "["))
            if peek(UInt8(ascii: "]")) {
                index += 1
            } else {
                while true {
                    try expect(UInt8(ascii: "["))
                    let key = try string()
                    try expect(UInt8(ascii: ","))
                    let value = try string()
                    try expect(UInt8(ascii: "]"))
                    result.append(KeyValue(key, value))
                    if peek(UInt8(ascii: ",")) { index += 1; continue }
                    try expect(UInt8(ascii: "]"))
                    break
                }
            }
            skipSpace()
            guard index == bytes.count else { throw fail("unexpected text after the array") }
            return result
        }

        mutating func hex4() throws(StoreError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw fail("bad hex digit in \\u escape")
                }
                value = value * 16 + digit
                index += 1
            }
            return value
        }

        mutating func string() throws(StoreError) -> String {
            try expect(UInt8(ascii: "\""))
            var utf8: [UInt8] = []
            while true {
                guard index < bytes.count else { throw fail("unterminated string") }
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: utf8, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw fail("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800..<0xDC00).contains(code) {
                            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                                bytes[index + 1] == UInt8(ascii: "u")
                            else { throw fail("lone surrogate") }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("bad surrogate pair") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw fail("lone surrogate") }
                        utf8.append(contentsOf: String(Character(scalar)).utf8)
                    default:
                        throw fail("unknown escape")
                    }
                case 0x00..<0x20:
                    throw fail("unescaped control character")
                default:
                    utf8.append(byte)
                }
            }
        }
    }
}
